#include "runtime/model.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "ops/tbb_for.h"

namespace pacer::runtime {

bool LoadOptions::default_repack() noexcept {
  const char* env = std::getenv("PACER_REPACK");
  return env == nullptr || std::string_view(env) != "0";
}

Model Model::load(const std::filesystem::path& path, const LoadOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  Model m;
  m.file_ = std::make_unique<loader::GgufFile>(loader::GgufFile::open(path));
  m.config_ = loader::ModelConfig::from_gguf(*m.file_);
  if (m.config_.rope_scaling == loader::RopeScaling::Yarn) {
    throw loader::LoadError(
        path.string(),
        std::string(m.file_->get_string("general.architecture")) + ".rope.scaling.type", -1,
        "YaRN RoPE scaling is not supported by pacer's forward pass");
  }
  m.weights_ = loader::Weights::bind(*m.file_, m.config_);
  std::vector<ops::WeightMatrix*> matmuls{&m.weights_.output};
  for (loader::LayerWeights& l : m.weights_.layers) {
    for (ops::WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      matmuls.push_back(w);
    }
  }
  if (opts.repack) {
    m.repacked_.reserve(matmuls.size());
    for (ops::WeightMatrix* w : matmuls) {
      if (!ops::InterleavedMatrix::pays(*w, ops::detect_isa())) continue;
      // Mapped in first, in parallel chunks (the repack's reads would take one page fault per
      // 4 KiB: ~1 s of a 2.2 GB F16 model's load), one matrix at a time so the file's pages and
      // the copy are resident together for one matrix only.
      const std::span<const std::byte> bytes(w->data, static_cast<size_t>(w->bytes()));
      constexpr size_t kChunk = size_t{8} << 20;
      ops::tbb_for_each_index(size_t{0}, (bytes.size() + kChunk - 1) / kChunk, [&](size_t c) {
        m.file_->populate(bytes.subspan(c * kChunk, std::min(kChunk, bytes.size() - c * kChunk)));
      });
      m.repacked_.push_back(ops::InterleavedMatrix::repack(*w));
      // The file's copy is not read again (the embedding table, which a tied output shares,
      // is: one row per token), so it leaves the resident set instead of counting twice.
      if (w->data != m.weights_.token_embd.data) {
        m.file_->drop_pages({w->data, static_cast<size_t>(w->bytes())});
      }
      *w = m.repacked_.back().view();
    }
  }
  // The matmul weights read in the file's layout are mapped in now (in parallel), not by page
  // faults inside the first prefill (F16 TinyLlama: ~540,000 faults that doubled its TTFT). The
  // embedding table is read one row per token and stays on demand, out of the resident set, but
  // it is read into the page cache now (MADV_WILLNEED): with the file not cached, each new token's
  // row was a read from the disk inside a decode step (TinyLlama Q4_K_M on the dev VM: embed p95
  // 2.7-3.0 ms, up to 6.4 ms, against ~25 us for a minor fault; with the read-ahead, 43 us p95
  // and 62 us at most). A cold load takes the table's read instead (+30-170 ms there), as
  // llama.cpp's, which populates the whole mapping.
  m.file_->read_ahead(
      {m.weights_.token_embd.data, static_cast<size_t>(m.weights_.token_embd.bytes())});
  std::vector<std::span<const std::byte>> file_weights;
  for (const ops::WeightMatrix* w : matmuls) {
    if (w->layout == ops::WeightLayout::RowMajor && w->data != m.weights_.token_embd.data) {
      file_weights.emplace_back(w->data, static_cast<size_t>(w->bytes()));
    }
  }
  ops::tbb_for_each_index(size_t{0}, file_weights.size(),
                          [&](size_t i) { m.file_->populate(file_weights[i]); });
  m.tokenizer_ = std::make_unique<loader::Tokenizer>(loader::Tokenizer::from_gguf(*m.file_));
  m.load_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

bool Model::bf16_dot_prefill(ops::Isa isa) const noexcept {
  if (isa != ops::Isa::Avx512 || !ops::bf16_dot_prefill()) return false;
  for (const ops::InterleavedMatrix& m : repacked_) {
    if (m.view().type == ops::WeightType::BF16) return true;
  }
  return false;
}

}  // namespace pacer::runtime
