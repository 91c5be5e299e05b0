// The `header` record: typed fields out of the parsed JSON object. Absent or null values stay
// empty; a value of the wrong type is an error naming the field.
#include <fmt/format.h>

#include "analysis/event_log.h"
#include "eventlog/schema.h"

namespace pacer::analysis {
namespace {

using nlohmann::json;

const json* member(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void wrong_type(std::string_view where, std::string_view key, const char* expected) {
  throw std::runtime_error(fmt::format("field \"{}{}\": expected {}", where, key, expected));
}

void take(const json& obj, std::string_view where, std::string_view key, std::string& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (!v->is_string()) wrong_type(where, key, "a string");
  out = v->get<std::string>();
}

void take(const json& obj, std::string_view where, std::string_view key,
          std::optional<int64_t>& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (v->is_number_integer()) {
    out = v->get<int64_t>();
  } else if (v->is_number_float() && v->get<double>() == static_cast<int64_t>(v->get<double>())) {
    out = static_cast<int64_t>(v->get<double>());
  } else {
    wrong_type(where, key, "an integer");
  }
}

void take(const json& obj, std::string_view where, std::string_view key,
          std::optional<double>& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (!v->is_number()) wrong_type(where, key, "a number");
  out = v->get<double>();
}

void take(const json& obj, std::string_view where, std::string_view key, std::optional<bool>& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (!v->is_boolean()) wrong_type(where, key, "true or false");
  out = v->get<bool>();
}

template <class T>
void take_array(const json& obj, std::string_view where, std::string_view key,
                std::vector<T>& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (!v->is_array()) wrong_type(where, key, "an array");
  for (const json& e : *v) {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!e.is_string()) wrong_type(where, key, "an array of strings");
      out.push_back(e.get<std::string>());
    } else {
      if (e.is_null()) continue;  // a value that was not measured
      if (!e.is_number()) wrong_type(where, key, "an array of numbers");
      out.push_back(e.get<T>());
    }
  }
}

// run.x16_gemv ({type: {streams, prefetch, page_touch}}) as one line of text, or nothing.
std::optional<std::string> x16_gemv_text(const json& run, std::string_view where) {
  const json* v = member(run, eventlog::run_key::kX16Gemv);
  if (!v) return std::nullopt;
  if (!v->is_object()) wrong_type(where, eventlog::run_key::kX16Gemv, "an object");
  std::string out;
  const std::string inside = fmt::format("{}{}.", where, eventlog::run_key::kX16Gemv);
  for (const auto& [type, plan] : v->items()) {
    if (!plan.is_object()) wrong_type(inside, type, "an object");
    const std::string at = fmt::format("{}{}.", inside, type);
    std::optional<int64_t> streams, page_touch, run_bytes;  // run_bytes: since session 50
    std::optional<bool> prefetch, prefetch_far;             // prefetch_far: since session 35
    std::string kernel;                                     // since session 51: "avx2" or absent
    take(plan, at, "streams", streams);
    take(plan, at, "prefetch", prefetch);
    take(plan, at, "page_touch", page_touch);
    take(plan, at, "prefetch_far", prefetch_far);
    take(plan, at, "run_bytes", run_bytes);
    take(plan, at, "kernel", kernel);
    out += fmt::format(
        "{}{} {} stream{}{}{}{}{}", out.empty() ? "" : "; ", type, streams.value_or(0),
        streams.value_or(0) == 1 ? "" : "s",
        !prefetch.value_or(false)      ? ""
        : prefetch_far.value_or(false) ? ", prefetch twice as far"
                                       : ", prefetch",
        page_touch.value_or(0) > 0 ? fmt::format(", page touch {} B", *page_touch) : std::string(),
        run_bytes.value_or(0) > 0 ? fmt::format(", runs of {} B", *run_bytes) : std::string(),
        kernel.empty() ? std::string() : fmt::format(", the {} kernel", kernel));
  }
  return out;
}

const json& object_or_empty(const json& obj, std::string_view key) {
  static const json kEmpty = json::object();
  const json* v = member(obj, key);
  if (!v) return kEmpty;
  if (!v->is_object()) wrong_type("", key, "an object");
  return *v;
}

}  // namespace

void parse_header_json(const json& j, Header& h) {
  namespace key = eventlog::header_key;
  namespace mk = eventlog::model_key;
  namespace rk = eventlog::run_key;
  namespace hk = eventlog::host_key;
  namespace ck = eventlog::counters_key;
  namespace fk = eventlog::frequency_key;
  namespace tk = eventlog::thermal_key;
  h.schema = j.at(key::kSchema).get<int>();
  take(j, "", key::kPacerVersion, h.pacer_version);
  take(j, "", key::kGitSha, h.git_sha);
  take(j, "", key::kTimeUtc, h.time_utc);
  take(j, "", key::kCommand, h.command);
  take_array(j, "", key::kArgv, h.argv);

  const json& m = object_or_empty(j, key::kModel);
  const std::string mw = fmt::format("{}.", key::kModel);
  take(m, mw, mk::kPath, h.model.path);
  take(m, mw, mk::kName, h.model.name);
  take(m, mw, mk::kArch, h.model.arch);
  take(m, mw, mk::kType, h.model.type);
  take(m, mw, mk::kFileType, h.model.file_type);
  take(m, mw, mk::kParams, h.model.params);
  take(m, mw, mk::kBytes, h.model.bytes);
  take(m, mw, mk::kMatmulBytesPerToken, h.model.matmul_bytes_per_token);
  take(m, mw, mk::kNLayers, h.model.n_layers);
  take(m, mw, mk::kNEmbd, h.model.n_embd);
  take(m, mw, mk::kNHeads, h.model.n_heads);
  take(m, mw, mk::kNKvHeads, h.model.n_kv_heads);
  take(m, mw, mk::kNFf, h.model.n_ff);
  take(m, mw, mk::kNVocab, h.model.n_vocab);

  const json& r = object_or_empty(j, key::kRun);
  const std::string rw = fmt::format("{}.", key::kRun);
  take(r, rw, rk::kThreads, h.run.threads);
  take(r, rw, rk::kPin, h.run.pin);
  take_array(r, rw, rk::kCpus, h.run.cpus);
  take(r, rw, rk::kCtx, h.run.ctx);
  take(r, rw, rk::kNPrompt, h.run.n_prompt);
  take(r, rw, rk::kNPredict, h.run.n_predict);
  take(r, rw, rk::kSeed, h.run.seed);
  take(r, rw, rk::kTemperature, h.run.temperature);
  take(r, rw, rk::kIsa, h.run.isa);
  take(r, rw, rk::kKvType, h.run.kv_type);
  take(r, rw, rk::kRecording, h.run.recording);
  take(r, rw, rk::kVnni, h.run.vnni);
  take(r, rw, rk::kAmx, h.run.amx);
  take(r, rw, rk::kBf16Dot, h.run.bf16_dot);
  take(r, rw, rk::kGemvPrefetch, h.run.gemv_prefetch);
  take(r, rw, rk::kGemvPrefetchUnpacking, h.run.gemv_prefetch_unpacking);
  take(r, rw, rk::kGemvStreams, h.run.gemv_streams);
  h.run.x16_gemv = x16_gemv_text(r, rw);
  take(r, rw, rk::kWorkStealing, h.run.work_stealing);
  take(r, rw, rk::kWorkStealingBalanced, h.run.work_stealing_balanced);
  take(r, rw, rk::kIdlePrefetch, h.run.idle_prefetch);
  take(r, rw, rk::kAttentionOnePass, h.run.attention_one_pass);
  take(r, rw, rk::kRepackedMatrices, h.run.repacked_matrices);
  if (const json* numa = member(r, rk::kNuma)) {
    take(*numa, fmt::format("{}{}.", rw, rk::kNuma), eventlog::numa_key::kPolicy, h.run.numa);
  }

  const json& host = object_or_empty(j, key::kHost);
  const std::string hw = fmt::format("{}.", key::kHost);
  take(host, hw, hk::kHostname, h.host.hostname);
  take(host, hw, hk::kCpuModel, h.host.cpu_model);
  take(host, hw, hk::kMicrocode, h.host.microcode);
  take(host, hw, hk::kCpuSignature, h.host.cpu_signature);
  take(host, hw, hk::kKernel, h.host.kernel);
  take(host, hw, hk::kGovernor, h.host.governor);
  take(host, hw, hk::kSmt, h.host.smt);
  take(host, hw, hk::kVirtualized, h.host.virtualized);
  take(host, hw, hk::kTscMhz, h.host.tsc_mhz);
  take_array(host, hw, hk::kAllowedCpus, h.host.allowed_cpus);
  if (const json* topo = member(host, hk::kTopology)) {
    const std::string tw = fmt::format("{}{}.", hw, hk::kTopology);
    take(*topo, tw, hk::kPackages, h.host.packages);
    take(*topo, tw, hk::kNumaNodes, h.host.numa_nodes);
    take(*topo, tw, hk::kCores, h.host.cores);
    take(*topo, tw, hk::kPus, h.host.pus);
    take(*topo, tw, hk::kL3Bytes, h.host.l3_bytes);
  }

  const json& c = object_or_empty(j, key::kCounters);
  const std::string cw = fmt::format("{}.", key::kCounters);
  take(c, cw, ck::kMode, h.counters.mode);
  take_array(c, cw, ck::kLive, h.counters.live);
  take(c, cw, ck::kRead, h.counters.read);
  take(c, cw, ck::kScope, h.counters.scope);
  take(c, cw, ck::kSoftwareScope, h.counters.software_scope);
  take(c, cw, ck::kBracketNs, h.counters.bracket_ns);
  if (h.counters.bracket_ns && !(*h.counters.bracket_ns >= 0)) {
    wrong_type(cw, ck::kBracketNs, "a number of nanoseconds >= 0");
  }
  if (const json* un = member(c, ck::kUnavailable)) {
    if (!un->is_array()) wrong_type(cw, ck::kUnavailable, "an array");
    const std::string uw = fmt::format("{}{}.", cw, ck::kUnavailable);
    for (const json& e : *un) {
      UnavailableCounter u;
      take(e, uw, ck::kEvent, u.event);
      take(e, uw, ck::kReason, u.reason);
      h.counters.unavailable.push_back(std::move(u));
    }
  }

  const json& f = object_or_empty(j, key::kFrequency);
  const std::string fw = fmt::format("{}.", key::kFrequency);
  take(f, fw, fk::kSource, h.frequency.source);
  take(f, fw, fk::kDetail, h.frequency.detail);
  take(f, fw, fk::kNominalMhz, h.frequency.nominal_mhz);

  const json& t = object_or_empty(j, key::kThermal);
  const std::string tw = fmt::format("{}.", key::kThermal);
  take(t, tw, tk::kThrottleCounters, h.throttle_counters);
  take(t, tw, tk::kRapl, h.rapl);

  take(j, "", key::kBandwidthGbs, h.bandwidth_gbs);
  take(j, "", key::kFmaGflops, h.fma_gflops);
  take(j, "", key::kKernelCeilingTokS, h.kernel_ceiling_tok_s);
  take_array(j, "", key::kFreqBeforeMhz, h.freq_before_mhz);
  take(j, "", key::kLoadMs, h.load_ms);
}

}  // namespace pacer::analysis
