// Model loading (weights in place in the mapping), the KV cache memory check, the generation loop
// (n tokens, stop strings, a full context, streaming) and the UTF-8/stop-string-safe text stream.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/synth.h"
#include "runtime/kv_cache.h"
#include "runtime/recorder.h"
#include "runtime/session.h"
#include "runtime_test_util.h"

namespace pacer::runtime {
namespace {

using ::testing::HasSubstr;

SessionOptions greedy(int threads = 2, int64_t ctx = 128) {
  SessionOptions so;
  so.threads = threads;
  so.ctx = ctx;
  so.sampler.temperature = 0;
  return so;
}

TEST(Model, WeightsAreViewsIntoTheMapping) {
  const test::SynthModel synth("tiny-qwen2", ops::WeightType::F16);
  // Without the repack (which F16 gets on AVX-512 machines: RepackedModel below).
  const Model m = Model::load(synth.path(), LoadOptions{.repack = false});
  const loader::GgufFile& f = m.file();
  const loader::Weights& w = m.weights();
  EXPECT_EQ(w.layers[0].wq.data, f.require_tensor("blk.0.attn_q.weight").data.data());
  EXPECT_EQ(w.layers[1].w_down.data, f.require_tensor("blk.1.ffn_down.weight").data.data());
  EXPECT_EQ(static_cast<const void*>(w.layers[0].bq.data()),
            static_cast<const void*>(f.require_tensor("blk.0.attn_q.bias").data.data()));
  EXPECT_EQ(w.output.data, w.token_embd.data);  // tied: the same bytes, not a copy
  EXPECT_EQ(m.config().arch, loader::Arch::Qwen2);
  EXPECT_GT(m.load_ms(), 0.0);
}

// Q4_0, Q8_0, F16 and BF16 matmul weights are repacked at load where the interleaved kernels run
// (ops/interleaved.h); the embedding table stays in the mapping, and the logits match the
// file-layout model's within float reassociation.
class RepackedModel : public ::testing::TestWithParam<ops::WeightType> {};

TEST_P(RepackedModel, WeightsAreRepackedWhereItPaysAndGiveTheSameLogits) {
  const test::SynthModel synth("tiny-qwen2", GetParam());
  const Model plain = Model::load(synth.path(), LoadOptions{.repack = false});
  const Model packed = Model::load(synth.path(), LoadOptions{.repack = true});
  EXPECT_EQ(plain.repacked_matrices(), 0);
  EXPECT_EQ(plain.weights().output.layout, ops::WeightLayout::RowMajor);
  const loader::Weights& w = packed.weights();
  if (!ops::InterleavedMatrix::pays(plain.weights().output, ops::detect_isa())) {
    EXPECT_EQ(packed.repacked_matrices(), 0);
    GTEST_SKIP() << "repacking does not pay for this type on this CPU's kernels "
                    "(InterleavedMatrix::pays): the weights stay in the file layout";
  }
  EXPECT_EQ(packed.repacked_matrices(), 7 * packed.config().n_layers + 1);
  EXPECT_EQ(w.output.layout, ops::WeightLayout::Interleaved16);
  EXPECT_EQ(w.layers[1].w_down.layout, ops::WeightLayout::Interleaved16);
  EXPECT_NE(w.output.data, w.token_embd.data);  // tied: the output is a repacked copy...
  EXPECT_EQ(w.token_embd.data, packed.file().require_tensor("token_embd.weight").data.data());
  EXPECT_EQ(w.matmul_bytes, plain.weights().matmul_bytes);  // ...streaming the same bytes
  const std::vector<int32_t> prompt = plain.tokenizer().encode("hello world", true);
  Session a(plain, greedy(2)), b(packed, greedy(2));
  auto close = [](std::span<const float> x, std::span<const float> y, const std::string& what) {
    ASSERT_EQ(x.size(), y.size());
    float scale = 0, diff = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, std::fabs(x[i]));
      diff = std::max(diff, std::fabs(x[i] - y[i]));
    }
    EXPECT_LE(diff, 1e-4f * scale) << what;
    EXPECT_EQ(ops::argmax(x), ops::argmax(y)) << what;
  };
  int32_t tok = 0;
  {
    const std::span<const float> la = a.prefill(prompt);
    close(la, b.prefill(prompt), "prefill");
    tok = ops::argmax(la);
  }
  for (int i = 0; i < 4; ++i) {
    const std::span<const float> la = a.decode(tok);
    close(la, b.decode(tok), "decode " + std::to_string(i));
    tok = ops::argmax(la);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, RepackedModel,
                         ::testing::Values(ops::WeightType::Q4_0, ops::WeightType::Q8_0,
                                           ops::WeightType::F16, ops::WeightType::BF16),
                         [](const auto& info) { return std::string(ops::type_name(info.param)); });

TEST(Model, MissingFileIsALoadError) {
  EXPECT_THROW(Model::load("/nonexistent/model.gguf"), loader::LoadError);
}

TEST(KvCache, SizeAndLayout) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  const loader::ModelConfig& c = synth.model().config();
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;
  // 100 positions take 7 whole blocks of 16 (ops/attention.h's layout).
  EXPECT_EQ(KvCache::bytes_needed(c, 100, ops::WeightType::F16), c.n_layers * 2 * 112 * kv_dim * 2);
  EXPECT_EQ(KvCache::bytes_needed(c, 100, ops::WeightType::F32), c.n_layers * 2 * 112 * kv_dim * 4);
  EXPECT_EQ(KvCache::bytes_needed(c, 112, ops::WeightType::F16),
            KvCache::bytes_needed(c, 100, ops::WeightType::F16));
  KvCache kv(c, 100, ops::WeightType::F16);
  EXPECT_EQ(kv.row_bytes(), kv_dim * 2);
  // Layers' K and V regions do not overlap and are 64-byte aligned.
  for (int64_t il = 0; il < c.n_layers; ++il) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(kv.k(il)) % 64, 0u);
    EXPECT_GE(kv.v(il) - kv.k(il), 100 * kv.row_bytes());
    if (il > 0) {
      EXPECT_GE(kv.k(il) - kv.v(il - 1), 100 * kv.row_bytes());
    }
  }
  EXPECT_THROW(KvCache(c, 10, ops::WeightType::Q4_0), MemoryError);
  EXPECT_THROW(KvCache(c, 0, ops::WeightType::F16), MemoryError);
}

// Pages of [p, p + n) resident now (mincore).
int64_t resident_pages(const std::byte* p, int64_t n) {
  const uintptr_t page = 4096, begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(n);
  std::vector<unsigned char> v((end - begin + page - 1) / page);
  if (::mincore(reinterpret_cast<void*>(begin), end - begin, v.data()) != 0) return -1;
  int64_t r = 0;
  for (unsigned char c : v) r += c & 1;
  return r;
}

TEST(KvCache, CommitMapsTheWholeCacheInUpToTheLimit) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  const loader::ModelConfig& c = synth.model().config();
  KvCache big(c, 4096, ops::WeightType::F32);  // fresh pages: none resident before the commit
  const int64_t pages = (big.bytes() + 4095) / 4096;
  ASSERT_LT(resident_pages(big.k(0), big.bytes()), pages / 2) << "a fresh cache is already mapped";
  EXPECT_FALSE(big.commit(big.bytes() - 1));  // over the limit: left to first writes
  EXPECT_LT(resident_pages(big.k(0), big.bytes()), pages / 2);
  // What is already written stays (the cache's first rows, the last V row).
  const int64_t last = c.n_layers - 1, row = big.row_bytes();
  big.k(0)[0] = std::byte{0x5a};
  big.v(last)[row * 4095 + row - 1] = std::byte{0xa5};
  EXPECT_TRUE(big.commit(big.bytes()));
  EXPECT_GE(resident_pages(big.k(0), big.bytes()), pages);
  EXPECT_EQ(big.k(0)[0], std::byte{0x5a});
  EXPECT_EQ(big.v(last)[row * 4095 + row - 1], std::byte{0xa5});
}

TEST(KvCache, Q8_0RowsAreBlocksAndNeedHeadDimMultipleOf32) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  loader::ModelConfig c = synth.model().config();
  ASSERT_EQ(c.head_dim % 32, 0);
  const int64_t kv_dim = c.n_kv_heads * c.head_dim;
  // 34 bytes (fp16 scale + 32 int8) per 32 elements.
  EXPECT_EQ(KvCache::bytes_needed(c, 100, ops::WeightType::Q8_0),
            c.n_layers * 2 * 112 * kv_dim / 32 * 34);  // 100 positions: 7 blocks of 16
  EXPECT_EQ(KvCache(c, 100, ops::WeightType::Q8_0).row_bytes(), kv_dim / 32 * 34);
  c.head_dim = 48;
  try {
    KvCache(c, 10, ops::WeightType::Q8_0);
    ADD_FAILURE() << "head_dim 48 accepted for a q8_0 cache";
  } catch (const MemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--kv-type q8_0"));
    EXPECT_THAT(e.what(), HasSubstr("head_dim is 48"));
  }
}

TEST(KvCache, MemoryCheckNamesBytesNeededAndAvailable) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  const loader::ModelConfig& c = synth.model().config();
  // Against a given budget: 4096 positions need 2 MiB here; 1 MiB is available.
  try {
    KvCache kv(c, 4096, ops::WeightType::F16, 0, 1 << 20);
    FAIL() << "a cache larger than the budget was allocated";
  } catch (const MemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("context of 4096"));
    EXPECT_THAT(e.what(), HasSubstr("needs 2.0 MiB but only 1.0 MiB is available"));
    EXPECT_THAT(e.what(), HasSubstr("MemAvailable"));
  }
  // Against this machine's real MemAvailable: ask for four times what is available.
  const int64_t avail = mem_available_bytes();
  ASSERT_GT(avail, 0) << "MemAvailable unreadable";
  const int64_t per_position = KvCache::bytes_needed(c, 16, ops::WeightType::F32) / 16;
  const int64_t huge = avail / per_position * 4;
  try {
    KvCache kv(c, huge, ops::WeightType::F32);
    FAIL() << "a cache of 4x MemAvailable was allocated";
  } catch (const MemoryError& e) {
    EXPECT_THAT(e.what(), HasSubstr("context of " + std::to_string(huge)));
  }
  // Through the session: the same check, with the activations counted too.
  SessionOptions so = greedy();
  so.ctx = 1 << 20;
  so.mem_available = 64 << 20;
  EXPECT_THROW(Session(synth.model(), so), MemoryError);
  // An absurd context overflows no arithmetic.
  EXPECT_THROW(KvCache::bytes_needed(c, int64_t{1} << 62, ops::WeightType::F32), MemoryError);
}

TEST(Session, GeneratesNTokensAndStreamsTheirText) {
  const test::SynthModel synth("tiny", ops::WeightType::Q4_0);
  Session s(synth.model(), greedy());
  GenerateOptions go;
  go.n_predict = 12;
  go.ignore_eos = true;
  std::string streamed;
  const Generation g = s.generate("hello world", go, [&](std::string_view t) { streamed += t; });
  EXPECT_EQ(g.tokens.size(), 12u);
  EXPECT_EQ(g.stop_reason, "n_predict");
  EXPECT_EQ(streamed, g.text);
  std::string pieces;
  for (int32_t id : g.tokens) pieces += synth.model().tokenizer().piece(id);
  EXPECT_EQ(g.text, pieces);
  EXPECT_EQ(g.prompt_tokens, synth.model().tokenizer().encode("hello world", true));
  // Greedy generation is the argmax chain of the low-level API.
  Session manual(synth.model(), greedy());
  std::vector<int32_t> chain;
  int32_t tok = ops::argmax(manual.prefill(g.prompt_tokens));
  for (int i = 0; i < 12; ++i) {
    chain.push_back(tok);
    if (i < 11) tok = ops::argmax(manual.decode(tok));
  }
  EXPECT_EQ(g.tokens, chain);
  const Timings& t = g.timings;
  EXPECT_EQ(t.n_prompt, static_cast<int64_t>(g.prompt_tokens.size()));
  EXPECT_EQ(t.n_generated, 12);
  EXPECT_EQ(t.n_decode_steps, 11);  // the first token comes from the prefill's logits
  EXPECT_GT(t.prefill_tok_s(), 0);
  EXPECT_GT(t.decode_tok_s(), 0);
  EXPECT_GE(t.ttft_ms, t.prefill_ms);
  EXPECT_GT(t.peak_rss_kb, 0);
}

// A session that records keeps its workers spinning through the recorder's work between two
// steps (kRecordingSpinUs): with the executor's default spin they went to the futex at every step
// boundary, and each step's first matmul ran on a worker being woken. Without recording the
// default stays.
TEST(Session, RecordedWorkersSpinThroughStepBoundaries) {
  const test::SynthModel synth("tiny", ops::WeightType::Q4_0);
  {
    Session plain(synth.model(), greedy(2));
    EXPECT_EQ(plain.executor().spin_us(), 100);
  }
  const std::filesystem::path log = std::filesystem::temp_directory_path() /
                                    ("pacer_session_spin_" + std::to_string(::getpid()) + ".jsonl");
  RecorderOptions ro;
  ro.events_path = log.string();
  ro.workers = 2;
  ro.probe_energy = false;
  ro.measure_freq_before_after = false;
  int64_t slept = -1;
  {
    Recorder rec(ro);
    SessionOptions so = greedy(2);
    so.recorder = &rec;
    Session s(synth.model(), so);
    EXPECT_EQ(s.executor().spin_us(), kRecordingSpinUs);
    if (s.executor().joined_workers() < 1) GTEST_SKIP() << "TBB supplied no worker thread";
    GenerateOptions go;
    go.n_predict = 16;
    go.ignore_eos = true;
    const auto sleeps = [&] { return s.executor().placements().at(1).sleeps; };
    const int64_t before = sleeps();
    const Generation g = s.generate("hello world", go, [](std::string_view) {});
    ASSERT_EQ(g.timings.n_decode_steps, 15);
    slept = sleeps() - before;
  }
  // The recorder's gaps between steps (~0.4 ms on the dev VM; far longer under a sanitizer): the
  // worker may sleep only across those longer than its spin. With the default 100 us it slept
  // across every one.
  std::vector<int64_t> t0, t1;
  {
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.value("type", "") != "step") continue;
      t0.push_back(j["t0_ns"].get<int64_t>());
      t1.push_back(j["t1_ns"].get<int64_t>());
    }
  }
  ASSERT_EQ(t0.size(), 16u);  // the prefill and 15 decode steps
  int64_t long_gaps = 0;
  for (size_t i = 1; i < t0.size(); ++i) {
    if (t0[i] - t1[i - 1] >= int64_t{kRecordingSpinUs} * 1000 / 2) ++long_gaps;
  }
  // Two to spare: before the first step and after the last (generate's own work).
  EXPECT_LE(slept, long_gaps + 2) << "the recorded decode's worker slept between steps";
  std::error_code ec;
  std::filesystem::remove(log, ec);
}

// Decode past kAttentionKeySegment keys splits each KV head's keys into segments on the session's
// workers (ops/attention.h): the logits must not depend on how many workers there are.
TEST(Session, LongDecodeLogitsDoNotDependOnTheThreadCount) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  const int64_t n_vocab = synth.model().config().n_vocab;
  std::vector<int32_t> prompt(600);
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<int32_t>(1 + (i * 7919) % (n_vocab - 1));
  }
  std::vector<std::vector<float>> logits_by_threads;
  for (int threads : {1, 2, 3}) {
    Session s(synth.model(), greedy(threads, 1024));
    s.prefill(prompt);
    std::vector<float> all;
    for (int32_t tok : {5, 9, 2}) {  // positions 600..602: 601..603 keys, two segments
      const std::span<const float> l = s.decode(tok);
      all.insert(all.end(), l.begin(), l.end());
    }
    logits_by_threads.push_back(std::move(all));
  }
  ASSERT_FALSE(logits_by_threads[0].empty());
  EXPECT_EQ(logits_by_threads[1], logits_by_threads[0]) << "2 threads";
  EXPECT_EQ(logits_by_threads[2], logits_by_threads[0]) << "3 threads";
}

TEST(Session, StopStringEndsGenerationAndIsNotPrinted) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  GenerateOptions go;
  go.n_predict = 24;
  go.ignore_eos = true;
  Session s(synth.model(), greedy());
  const Generation full = s.generate("abc", go);
  ASSERT_GE(full.text.size(), 8u);
  // Stop at a string that first occurs somewhere in the middle of the full text.
  const size_t at = full.text.size() / 2;
  const std::string stop = full.text.substr(at, 3);
  const size_t first = full.text.find(stop);
  go.stop = {stop};
  std::string streamed;
  const Generation cut = s.generate("abc", go, [&](std::string_view t) { streamed += t; });
  EXPECT_EQ(cut.stop_reason, "stop_string");
  EXPECT_EQ(cut.text, full.text.substr(0, first));
  EXPECT_EQ(streamed, cut.text);
  EXPECT_LT(cut.tokens.size(), full.tokens.size());
}

TEST(Session, FullContextStopsGeneration) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  Session s(synth.model(), greedy(1, 12));
  GenerateOptions go;
  go.n_predict = 100;
  go.ignore_eos = true;
  const Generation g = s.generate("hi", go);
  EXPECT_EQ(g.stop_reason, "context_full");
  // Every position holds a token: the prompt, then all generated tokens but the last.
  EXPECT_EQ(static_cast<int64_t>(g.prompt_tokens.size() + g.tokens.size()) - 1, 12);
  EXPECT_EQ(s.n_past(), 12);
  // A prompt longer than the context is refused before any work.
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += " word";
  EXPECT_THROW(s.generate(long_prompt, go), std::length_error);
  s.reset();
  EXPECT_THROW(s.prefill(std::vector<int32_t>(13, 1)), std::length_error);
}

TEST(Session, SeededSamplingIsRepeatable) {
  const test::SynthModel synth("tiny-gemma3", ops::WeightType::Q8_0);
  SessionOptions so = greedy();
  so.sampler.temperature = 0.9f;
  so.sampler.seed = 7;
  GenerateOptions go;
  go.n_predict = 10;
  go.ignore_eos = true;
  const Generation a = Session(synth.model(), so).generate("x", go);
  const Generation b = Session(synth.model(), so).generate("x", go);
  EXPECT_EQ(a.tokens, b.tokens);
  so.sampler.seed = 8;
  const Generation c = Session(synth.model(), so).generate("x", go);
  EXPECT_NE(a.tokens, c.tokens);  // 10 tokens from a 640-token vocabulary at temperature 0.9
}

TEST(Session, ImpossiblePinningIsAnError) {
  const test::SynthModel synth("tiny", ops::WeightType::F16);
  SessionOptions so = greedy(64);
  so.pin = PinSpec::parse("cores");
  EXPECT_THROW(Session(synth.model(), so), TopologyError);
}

TEST(TextStream, HoldsBackIncompleteUtf8) {
  TextStream s({});
  EXPECT_FALSE(s.push("a\xE2\x82"));  // "a" + the first two bytes of the euro sign
  EXPECT_EQ(s.take_ready(), "a");
  EXPECT_FALSE(s.push("\xAC b"));
  EXPECT_EQ(s.take_ready(), "\xE2\x82\xAC b");
  EXPECT_FALSE(s.push("\xF0\x9F"));  // half of a 4-byte emoji
  EXPECT_EQ(s.take_ready(), "");
  EXPECT_EQ(s.flush(), "\xF0\x9F");  // at the end, whatever is left goes out
}

TEST(TextStream, StopStringAcrossPiecesIsNeverPrinted) {
  TextStream s({"o W", "zzz"});
  std::string out;
  EXPECT_FALSE(s.push("Hel"));
  out += s.take_ready();
  EXPECT_FALSE(s.push("lo"));  // "...lo" could start "o W": the "o" waits
  out += s.take_ready();
  EXPECT_EQ(out, "Hell");
  EXPECT_TRUE(s.push(" World"));
  out += s.take_ready();
  EXPECT_EQ(out, "Hell");
  EXPECT_EQ(s.text(), "Hell");
  // A held-back prefix that does not become a stop string is released.
  TextStream t({"ab"});
  EXPECT_FALSE(t.push("xa"));
  EXPECT_EQ(t.take_ready(), "x");
  EXPECT_FALSE(t.push("c"));
  EXPECT_EQ(t.take_ready(), "ac");
}

}  // namespace
}  // namespace pacer::runtime
