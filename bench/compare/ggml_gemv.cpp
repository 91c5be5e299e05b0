// Side-by-side reference: times one ggml MUL_MAT (weights [cols, rows] of TYPE x one f32 token,
// the activation quantization included) on llama.cpp's CPU backend at pacer's bench shapes and
// an explicit thread count (test-backend-ops' perf mode only has 4096x14336 and always uses every
// hardware thread). Like pacer's bench loop, each timed call computes one one-node graph; calls
// rotate over the weight copies. cold=1 makes enough copies to total >= 2x the LLC (DRAM figure),
// cold=0 reuses one (cache-resident when it fits, as in test-backend-ops).
//
// Not part of the pacer build: bench/compare/run_compare.sh compiles it against
// /work/llama.cpp/build when that exists. Uses only ggml's public API.
//
// usage: ggml_gemv TYPE ROWS COLS THREADS COLD CALLS   (TYPE: q4_0 q8_0 f16 bf16 f32)
// prints: type rows cols threads cold median_us median_GB/s min_us max_GB/s
// (min/max: the fastest graph run, the figure least disturbed by other load on a shared machine)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s TYPE ROWS COLS THREADS COLD REPS\n", argv[0]);
    return 2;
  }
  const std::string tname = argv[1];
  const int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]);
  const int threads = std::atoi(argv[4]);
  const bool cold = std::atoi(argv[5]) != 0;
  const int calls = std::atoi(argv[6]);
  ggml_type type = GGML_TYPE_COUNT;
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name(static_cast<ggml_type>(t));
    if (n != nullptr && tname == n) type = static_cast<ggml_type>(t);
  }
  if (type == GGML_TYPE_COUNT) {
    std::fprintf(stderr, "unknown type %s\n", tname.c_str());
    return 2;
  }
  const size_t matrix_bytes = ggml_row_size(type, cols) * static_cast<size_t>(rows);
  const size_t cold_bytes = size_t{2} * 105 * (size_t{1} << 20);
  const int copies =
      cold ? static_cast<int>(std::max<size_t>(1, (cold_bytes + matrix_bytes - 1) / matrix_bytes))
           : 1;
  const int nodes = copies;  // one single-node graph per weight copy

  ggml_backend_t backend = ggml_backend_cpu_init();
  ggml_backend_cpu_set_n_threads(backend, threads);
  ggml_init_params params = {
      ggml_tensor_overhead() * (copies + nodes + 8) + nodes * ggml_graph_overhead_custom(16, false),
      nullptr, true};
  ggml_context* ctx = ggml_init(params);
  std::vector<ggml_tensor*> w(copies);
  for (int i = 0; i < copies; ++i) w[i] = ggml_new_tensor_2d(ctx, type, cols, rows);
  ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, 1);
  std::vector<ggml_tensor*> outs(nodes);
  for (int i = 0; i < nodes; ++i) outs[i] = ggml_mul_mat(ctx, w[i % copies], x);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
  if (buf == nullptr) {
    std::fprintf(stderr, "allocation failed\n");
    return 1;
  }
  // Weights: 64 random rows quantized with ggml's own quantizer, tiled.
  std::vector<float> src(static_cast<size_t>(cols));
  std::vector<uint8_t> rowq(ggml_row_size(type, cols));
  std::vector<uint8_t> block(ggml_row_size(type, cols) * 64);
  srand(1);
  for (int r = 0; r < 64; ++r) {
    for (float& f : src) f = (static_cast<float>(rand()) / RAND_MAX - 0.5f) * 0.1f;
    ggml_quantize_chunk(type, src.data(), block.data() + r * rowq.size(), 0, 1, cols, nullptr);
  }
  std::vector<uint8_t> full(matrix_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(full.data() + r * rowq.size(), block.data() + (r % 64) * rowq.size(), rowq.size());
  }
  for (int i = 0; i < copies; ++i) ggml_backend_tensor_set(w[i], full.data(), 0, matrix_bytes);
  for (float& f : src) f = static_cast<float>(rand()) / RAND_MAX - 0.5f;
  ggml_backend_tensor_set(x, src.data(), 0, static_cast<size_t>(cols) * sizeof(float));

  std::vector<ggml_cgraph*> graphs(nodes);
  for (int i = 0; i < nodes; ++i) {
    graphs[i] = ggml_new_graph_custom(ctx, 16, false);
    ggml_build_forward_expand(graphs[i], outs[i]);
  }
  for (int i = 0; i < nodes; ++i) ggml_backend_graph_compute(backend, graphs[i]);  // warm-up
  std::vector<double> per_node_us;
  for (int r = 0; r < calls; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ggml_backend_graph_compute(backend, graphs[r % nodes]);
    const auto t1 = std::chrono::steady_clock::now();
    per_node_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(per_node_us.begin(), per_node_us.end());
  const double med = per_node_us[per_node_us.size() / 2], best = per_node_us.front();
  std::printf("%s %lld %lld %d %d %.2f %.2f %.2f %.2f\n", tname.c_str(),
              static_cast<long long>(rows), static_cast<long long>(cols), threads, cold ? 1 : 0,
              med, static_cast<double>(matrix_bytes) / (med * 1e-6) / 1e9, best,
              static_cast<double>(matrix_bytes) / (best * 1e-6) / 1e9);
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
  ggml_backend_free(backend);
  return 0;
}
