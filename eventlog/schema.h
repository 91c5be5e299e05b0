#pragma once
// The event-log schema (docs/event-log.md): the one place that says which record types, enum
// names, field keys and counter keys a pacer event log uses, and which schema version this build
// writes and reads. runtime/ writes through it, analysis/ reads through it; it depends on nothing
// of pacer, so neither side needs the other's headers.
//
// Unknown values, one rule for both directions: a name this build does not know parses to
// `Phase::Other` / `OpKind::Other` (a newer writer may add names; readers must not fail on them),
// and a value outside the table prints as "other" (never silently as another valid name).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace pacer::eventlog {

// The schema this build writes and the newest it reads. Additive changes (new keys, new record
// types, new enum names) keep the version; readers ignore what they do not know.
inline constexpr int kSchemaVersion = 1;

template <class Enum>
struct NamedValue {
  Enum value;
  std::string_view name;
};

// The name of `value` in `table`, or `fallback` when the table has no entry for it.
template <class Enum, size_t N>
constexpr std::string_view name_in(const std::array<NamedValue<Enum>, N>& table, Enum value,
                                   std::string_view fallback) noexcept {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return fallback;
}

// The value named `name` in `table`, or nullopt.
template <class Enum, size_t N>
constexpr std::optional<Enum> value_in(const std::array<NamedValue<Enum>, N>& table,
                                       std::string_view name) noexcept {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

// The part of the run an op or step belongs to. `Other` is never written by pacer's recorder; it
// stands for a name this build does not know.
enum class Phase : uint8_t { Tokenize, Prefill, Decode, Sample, Detokenize, Other };

inline constexpr std::array<NamedValue<Phase>, 6> kPhaseNames{{
    {Phase::Tokenize, "tokenize"},
    {Phase::Prefill, "prefill"},
    {Phase::Decode, "decode"},
    {Phase::Sample, "sample"},
    {Phase::Detokenize, "detokenize"},
    {Phase::Other, "other"},
}};
// Arrays indexed by Phase have this many entries.
inline constexpr size_t kPhaseCount = kPhaseNames.size();

constexpr std::string_view phase_name(Phase p) noexcept {
  return name_in(kPhaseNames, p, "other");
}
constexpr Phase parse_phase(std::string_view s) noexcept {
  return value_in(kPhaseNames, s).value_or(Phase::Other);
}

// What an op computes (docs/event-log.md `op.kind`).
enum class OpKind : uint8_t { Matmul, Attention, Norm, Elementwise, Embed, Sample, Other };

inline constexpr std::array<NamedValue<OpKind>, 7> kOpKindNames{{
    {OpKind::Matmul, "matmul"},
    {OpKind::Attention, "attention"},
    {OpKind::Norm, "norm"},
    {OpKind::Elementwise, "elementwise"},
    {OpKind::Embed, "embed"},
    {OpKind::Sample, "sample"},
    {OpKind::Other, "other"},
}};
inline constexpr size_t kOpKindCount = kOpKindNames.size();

constexpr std::string_view op_kind_name(OpKind k) noexcept {
  return name_in(kOpKindNames, k, "other");
}
constexpr OpKind parse_op_kind(std::string_view s) noexcept {
  return value_in(kOpKindNames, s).value_or(OpKind::Other);
}

// The tables list every enumerator once, in declaration order, so `static_cast<size_t>(value)`
// indexes them and arrays sized kPhaseCount / kOpKindCount cover every value.
template <class Enum, size_t N>
constexpr bool lists_every_value_in_order(const std::array<NamedValue<Enum>, N>& table) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(table[i].value) != i) return false;
    for (size_t j = 0; j < i; ++j) {
      if (table[j].name == table[i].name) return false;
    }
  }
  return true;
}
static_assert(lists_every_value_in_order(kPhaseNames));
static_assert(lists_every_value_in_order(kOpKindNames));
static_assert(kPhaseNames.back().value == Phase::Other, "Other is the last Phase");
static_assert(kOpKindNames.back().value == OpKind::Other, "Other is the last OpKind");

// Record types: the "type" of every line.
namespace record {
inline constexpr std::string_view kType = "type";  // the key itself
inline constexpr std::string_view kHeader = "header";
inline constexpr std::string_view kOp = "op";
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kFooter = "footer";
inline constexpr std::string_view kBench = "bench";
}  // namespace record

// Keys of the `header` line (top level; its objects' keys follow). The caller adds `command`,
// `argv`, `model`, `run`, the host's `topology` and `load_ms`; the recorder the rest.
namespace header_key {
inline constexpr std::string_view kSchema = "schema";
inline constexpr std::string_view kPacerVersion = "pacer_version";
inline constexpr std::string_view kGitSha = "git_sha";
inline constexpr std::string_view kTimeUtc = "time_utc";
inline constexpr std::string_view kCommand = "command";
inline constexpr std::string_view kArgv = "argv";
inline constexpr std::string_view kBenchTest = "bench_test";      // pacer bench's recorded rows
inline constexpr std::string_view kOverheadRun = "overhead_run";  // pacer bench --overhead
inline constexpr std::string_view kModel = "model";
inline constexpr std::string_view kRun = "run";
inline constexpr std::string_view kHost = "host";
inline constexpr std::string_view kCounters = "counters";
inline constexpr std::string_view kFrequency = "frequency";
inline constexpr std::string_view kThermal = "thermal";
inline constexpr std::string_view kCgroup = "cgroup";
inline constexpr std::string_view kBandwidthGbs = "bandwidth_gbs";
inline constexpr std::string_view kBandwidthMethod = "bandwidth_method";
inline constexpr std::string_view kFmaGflops = "fma_gflops";
inline constexpr std::string_view kFmaMethod = "fma_method";
// The decode matmuls' tokens per second with their weights in L2, for the run's threads
// (runtime/kernel_ceiling.h; pacer bench's recorded tg rows), and how it was measured.
inline constexpr std::string_view kKernelCeilingTokS = "kernel_ceiling_tok_s";
inline constexpr std::string_view kKernelCeilingMethod = "kernel_ceiling_method";
inline constexpr std::string_view kFreqBeforeMhz = "freq_before_mhz";
inline constexpr std::string_view kFreqCpus = "freq_cpus";
inline constexpr std::string_view kFreqBeforeSource = "freq_before_source";
inline constexpr std::string_view kDerivedMetrics =
    "derived_metrics";  // [{"name","formula","caveat"}]
inline constexpr std::string_view kLoadMs = "load_ms";
inline constexpr std::array kAll{kSchema,
                                 kPacerVersion,
                                 kGitSha,
                                 kTimeUtc,
                                 kCommand,
                                 kArgv,
                                 kBenchTest,
                                 kOverheadRun,
                                 kModel,
                                 kRun,
                                 kHost,
                                 kCounters,
                                 kFrequency,
                                 kThermal,
                                 kCgroup,
                                 kBandwidthGbs,
                                 kBandwidthMethod,
                                 kFmaGflops,
                                 kFmaMethod,
                                 kKernelCeilingTokS,
                                 kKernelCeilingMethod,
                                 kFreqBeforeMhz,
                                 kFreqCpus,
                                 kFreqBeforeSource,
                                 kDerivedMetrics,
                                 kLoadMs};
}  // namespace header_key

// Keys of the header's `model` object.
namespace model_key {
inline constexpr std::string_view kPath = "path";
inline constexpr std::string_view kName = "name";
inline constexpr std::string_view kArch = "arch";
inline constexpr std::string_view kType = "type";
// llama.cpp's name for the file's general.file_type ("Q4_K - Medium"); absent where it has none.
inline constexpr std::string_view kFileType = "file_type";
inline constexpr std::string_view kParams = "params";
inline constexpr std::string_view kBytes = "bytes";
inline constexpr std::string_view kMatmulBytesPerToken = "matmul_bytes_per_token";
inline constexpr std::string_view kNLayers = "n_layers";
inline constexpr std::string_view kNEmbd = "n_embd";
inline constexpr std::string_view kNHeads = "n_heads";
inline constexpr std::string_view kNKvHeads = "n_kv_heads";
inline constexpr std::string_view kHeadDim = "head_dim";
inline constexpr std::string_view kNFf = "n_ff";
inline constexpr std::string_view kNVocab = "n_vocab";
inline constexpr std::string_view kNCtxTrain = "n_ctx_train";
inline constexpr std::string_view kRopeBase = "rope_base";
inline constexpr std::string_view kNormEps = "norm_eps";
inline constexpr std::string_view kTiedEmbeddings = "tied_embeddings";
inline constexpr std::string_view kSlidingWindow = "sliding_window";
inline constexpr std::array kAll{kPath,     kName,    kArch,           kType,
                                 kFileType, kParams,  kBytes,          kMatmulBytesPerToken,
                                 kNLayers,  kNEmbd,   kNHeads,         kNKvHeads,
                                 kHeadDim,  kNFf,     kNVocab,         kNCtxTrain,
                                 kRopeBase, kNormEps, kTiedEmbeddings, kSlidingWindow};
}  // namespace model_key

// Keys of the header's `run` object.
namespace run_key {
inline constexpr std::string_view kThreads = "threads";
inline constexpr std::string_view kPin = "pin";
inline constexpr std::string_view kCpus = "cpus";
inline constexpr std::string_view kPinned = "pinned";
inline constexpr std::string_view kCtx = "ctx";
inline constexpr std::string_view kMaxBatch = "max_batch";
inline constexpr std::string_view kNPrompt = "n_prompt";
inline constexpr std::string_view kNPredict = "n_predict";
inline constexpr std::string_view kSeed = "seed";
inline constexpr std::string_view kTemperature = "temperature";
inline constexpr std::string_view kTopK = "top_k";
inline constexpr std::string_view kTopP = "top_p";
inline constexpr std::string_view kMinP = "min_p";
inline constexpr std::string_view kRepeatPenalty = "repeat_penalty";
inline constexpr std::string_view kIsa = "isa";
inline constexpr std::string_view kVnni = "vnni";
inline constexpr std::string_view kAmx = "amx";
inline constexpr std::string_view kBf16Dot = "bf16_dot";
inline constexpr std::string_view kRepackedMatrices = "repacked_matrices";
inline constexpr std::string_view kGemvPrefetch = "gemv_prefetch";
inline constexpr std::string_view kGemvPrefetchUnpacking = "gemv_prefetch_unpacking";
inline constexpr std::string_view kGemvStreams = "gemv_streams";
inline constexpr std::string_view kX16Gemv = "x16_gemv";  // {type: {streams, prefetch, page_touch}}
inline constexpr std::string_view kWorkStealing = "work_stealing";  // the decode GEMVs' jobs
inline constexpr std::string_view kWorkStealingBalanced = "work_stealing_balanced";  // the GEMMs'
inline constexpr std::string_view kIdlePrefetch = "idle_prefetch";
inline constexpr std::string_view kKvType = "kv_type";
// The AVX2 attention took all of a KV head's query heads in one pass (ops/isa.h attention_one_pass)
inline constexpr std::string_view kAttentionOnePass = "attention_one_pass";
inline constexpr std::string_view kRecording = "recording";
inline constexpr std::string_view kNuma = "numa";  // its keys: numa_key below
inline constexpr std::array kAll{kThreads,
                                 kPin,
                                 kCpus,
                                 kPinned,
                                 kCtx,
                                 kMaxBatch,
                                 kNPrompt,
                                 kNPredict,
                                 kSeed,
                                 kTemperature,
                                 kTopK,
                                 kTopP,
                                 kMinP,
                                 kRepeatPenalty,
                                 kIsa,
                                 kVnni,
                                 kAmx,
                                 kBf16Dot,
                                 kRepackedMatrices,
                                 kGemvPrefetch,
                                 kGemvPrefetchUnpacking,
                                 kGemvStreams,
                                 kX16Gemv,
                                 kWorkStealing,
                                 kWorkStealingBalanced,
                                 kIdlePrefetch,
                                 kKvType,
                                 kAttentionOnePass,
                                 kRecording,
                                 kNuma};
}  // namespace run_key

// Keys of the header's `host` object and of its `topology`.
namespace host_key {
inline constexpr std::string_view kHostname = "hostname";
inline constexpr std::string_view kCpuModel = "cpu_model";
inline constexpr std::string_view kMicrocode = "microcode";
inline constexpr std::string_view kCpuSignature = "cpu_signature";
inline constexpr std::string_view kKernel = "kernel";
inline constexpr std::string_view kGovernor = "governor";
inline constexpr std::string_view kSmt = "smt";
inline constexpr std::string_view kVirtualized = "virtualized";
inline constexpr std::string_view kHypervisor = "hypervisor";
inline constexpr std::string_view kTscMhz = "tsc_mhz";
inline constexpr std::string_view kOnlineCpus = "online_cpus";
inline constexpr std::string_view kAllowedCpus = "allowed_cpus";
inline constexpr std::string_view kPerfEventParanoid = "perf_event_paranoid";
inline constexpr std::string_view kTopology = "topology";
inline constexpr std::array kAll{
    kHostname,   kCpuModel,    kMicrocode,         kCpuSignature, kKernel,
    kGovernor,   kSmt,         kVirtualized,       kHypervisor,   kTscMhz,
    kOnlineCpus, kAllowedCpus, kPerfEventParanoid, kTopology};
// topology
inline constexpr std::string_view kPackages = "packages";
inline constexpr std::string_view kNumaNodes = "numa_nodes";
inline constexpr std::string_view kCores = "cores";
inline constexpr std::string_view kPus = "pus";
inline constexpr std::string_view kL3Bytes = "l3_bytes";
inline constexpr std::array kTopologyAll{kPackages, kNumaNodes, kCores, kPus, kL3Bytes};
}  // namespace host_key

// Keys of the header's `counters` object and of its `unavailable[]` entries.
namespace counters_key {
inline constexpr std::string_view kMode = "mode";
inline constexpr std::string_view kLive = "live";
inline constexpr std::string_view kUnavailable = "unavailable";  // [{"event","reason"}]
inline constexpr std::string_view kRead = "read";
inline constexpr std::string_view kScope = "scope";
inline constexpr std::string_view kSoftwareScope = "software_scope";
inline constexpr std::string_view kRunq = "runq";
// Measured cost of one op bracket's counter reads (begin + end) on the calling thread, median.
inline constexpr std::string_view kBracketNs = "bracket_ns";
inline constexpr std::array kAll{kMode,  kLive,          kUnavailable, kRead,
                                 kScope, kSoftwareScope, kRunq,        kBracketNs};
// unavailable[] entries
inline constexpr std::string_view kEvent = "event";
inline constexpr std::string_view kReason = "reason";
}  // namespace counters_key

// Keys of the header's `frequency` object and of its `rejected[]` entries.
namespace frequency_key {
inline constexpr std::string_view kSource = "source";
inline constexpr std::string_view kDetail = "detail";
inline constexpr std::string_view kGranularity = "granularity";
inline constexpr std::string_view kNominalMhz = "nominal_mhz";
inline constexpr std::string_view kTscMhz = "tsc_mhz";
inline constexpr std::string_view kTscSource = "tsc_source";
inline constexpr std::string_view kRejected = "rejected";  // [{"source","reason"}]
inline constexpr std::array kAll{kSource, kDetail,    kGranularity, kNominalMhz,
                                 kTscMhz, kTscSource, kRejected};
// rejected[] entries: kSource and
inline constexpr std::string_view kReason = "reason";
}  // namespace frequency_key

// Keys of the header's `thermal` object.
namespace thermal_key {
inline constexpr std::string_view kThrottleCounters = "throttle_counters";  // present | absent
inline constexpr std::string_view kRapl = "rapl";  // the energy meter's name, or absent
inline constexpr std::string_view kThrottleReason = "throttle_reason";
inline constexpr std::string_view kRaplReason = "rapl_reason";
inline constexpr std::array kAll{kThrottleCounters, kRapl, kThrottleReason, kRaplReason};
}  // namespace thermal_key

// Keys of the header's `cgroup` object (or {"reason"} when none is readable).
namespace cgroup_key {
inline constexpr std::string_view kVersion = "version";
inline constexpr std::string_view kPath = "path";
inline constexpr std::string_view kQuotaUs = "quota_us";
inline constexpr std::string_view kPeriodUs = "period_us";
inline constexpr std::string_view kQuotaCpus = "quota_cpus";
inline constexpr std::string_view kNrPeriods = "nr_periods";
inline constexpr std::string_view kNrThrottled = "nr_throttled";
inline constexpr std::string_view kThrottledNs = "throttled_ns";
inline constexpr std::string_view kReason = "reason";
inline constexpr std::array kAll{kVersion,   kPath,        kQuotaUs,     kPeriodUs, kQuotaCpus,
                                 kNrPeriods, kNrThrottled, kThrottledNs, kReason};
}  // namespace cgroup_key

// Keys of `op` lines and of their `workers[]` entries.
namespace op_key {
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kPhase = "phase";
inline constexpr std::string_view kName = "name";
inline constexpr std::string_view kLayer = "layer";
inline constexpr std::string_view kKind = "kind";
inline constexpr std::string_view kWtype = "wtype";
inline constexpr std::string_view kRows = "rows";
inline constexpr std::string_view kCols = "cols";
inline constexpr std::string_view kTokens = "tokens";
inline constexpr std::string_view kWeightBytes = "weight_bytes";
inline constexpr std::string_view kKvBytes = "kv_bytes";
inline constexpr std::string_view kAttentionFlops = "attention_flops";
inline constexpr std::string_view kT0Ns = "t0_ns";
inline constexpr std::string_view kT1Ns = "t1_ns";
inline constexpr std::string_view kWorkers = "workers";
// workers[] entries
inline constexpr std::string_view kWorker = "w";
inline constexpr std::string_view kCpu = "cpu";
inline constexpr std::string_view kCpuEnd = "cpu_end";
inline constexpr std::string_view kChunks = "chunks";
inline constexpr std::string_view kFreqMhz = "freq_mhz";
inline constexpr std::string_view kRunqNs = "runq_ns";
inline constexpr std::string_view kOncpuNs = "oncpu_ns";
inline constexpr std::string_view kCounters = "counters";
// Every key above (op and worker), for readers and tests that check a line against the schema.
inline constexpr std::array kAll{
    kStep,   kPhase,       kName,    kLayer,          kKind,   kWtype,   kRows,    kCols,
    kTokens, kWeightBytes, kKvBytes, kAttentionFlops, kT0Ns,   kT1Ns,    kWorkers, kWorker,
    kCpu,    kCpuEnd,      kChunks,  kFreqMhz,        kRunqNs, kOncpuNs, kCounters};
}  // namespace op_key

// Keys of `step` lines.
namespace step_key {
inline constexpr std::string_view kStep = "step";
inline constexpr std::string_view kPhase = "phase";
inline constexpr std::string_view kNPast = "n_past";
inline constexpr std::string_view kNTokens = "n_tokens";
inline constexpr std::string_view kToken = "token";
inline constexpr std::string_view kPiece = "piece";
inline constexpr std::string_view kT0Ns = "t0_ns";
inline constexpr std::string_view kT1Ns = "t1_ns";
inline constexpr std::string_view kStepMs = "step_ms";
inline constexpr std::string_view kTokS = "tok_s";
inline constexpr std::string_view kFreq = "freq";    // [{"w","cpu","mhz"}]
inline constexpr std::string_view kSched = "sched";  // sums, plus "workers"
inline constexpr std::string_view kSchedWorkers = "workers";
// Keys of freq[] and sched.workers[] entries (besides the sched sums' names below).
inline constexpr std::string_view kWorker = "w";
inline constexpr std::string_view kCpu = "cpu";
inline constexpr std::string_view kMhz = "mhz";
inline constexpr std::string_view kTid = "tid";
inline constexpr std::string_view kRunqNs = "runq_ns";
inline constexpr std::string_view kOncpuNs = "oncpu_ns";
inline constexpr std::string_view kNvcsw = "nvcsw";
inline constexpr std::string_view kNivcsw = "nivcsw";
inline constexpr std::string_view kProcessCpuUsage = "process_cpu_usage";
inline constexpr std::string_view kHostCpuUsage = "host_cpu_usage";
inline constexpr std::string_view kStealMs = "steal_ms";
inline constexpr std::string_view kStealCpus = "steal_cpus";  // [{"cpu","ms"}]: CPUs with steal
inline constexpr std::string_view kMs = "ms";
inline constexpr std::string_view kEnergyJ = "energy_j";
inline constexpr std::string_view kPowerW = "power_w";
inline constexpr std::string_view kCgroup = "cgroup";
inline constexpr std::string_view kNrPeriods = "nr_periods";
inline constexpr std::string_view kNrThrottled = "nr_throttled";
inline constexpr std::string_view kThrottledNs = "throttled_ns";
inline constexpr std::string_view kThrottle = "throttle";
inline constexpr std::string_view kThrottleCore = "core";
inline constexpr std::string_view kThrottlePackage = "package";
inline constexpr std::string_view kRecorder = "recorder";
// Every top-level key of a step line.
inline constexpr std::array kAll{kStep,         kPhase,   kNPast,   kNTokens,   kToken,
                                 kPiece,        kT0Ns,    kT1Ns,    kStepMs,    kTokS,
                                 kFreq,         kSched,   kStealMs, kStealCpus, kProcessCpuUsage,
                                 kHostCpuUsage, kEnergyJ, kPowerW,  kCgroup,    kThrottle,
                                 kRecorder};
}  // namespace step_key

// Keys of a step's `recorder` object: the recorder's own cost in that step.
namespace step_recorder_key {
inline constexpr std::string_view kOps = "ops";
inline constexpr std::string_view kSerializeUs = "serialize_us";
inline constexpr std::string_view kCalibrateUs = "calibrate_us";
inline constexpr std::array kAll{kOps, kSerializeUs, kCalibrateUs};
}  // namespace step_recorder_key

// Keys of the `footer` line.
namespace footer_key {
inline constexpr std::string_view kSteps = "steps";
inline constexpr std::string_view kNPrompt = "n_prompt";
inline constexpr std::string_view kNGenerated = "n_generated";
inline constexpr std::string_view kPeakRssKb = "peak_rss_kb";
inline constexpr std::string_view kLoadMs = "load_ms";
inline constexpr std::string_view kTtftMs = "ttft_ms";
inline constexpr std::string_view kPrefillTokS = "prefill_tok_s";
inline constexpr std::string_view kDecodeTokS = "decode_tok_s";
inline constexpr std::string_view kWallMs = "wall_ms";
inline constexpr std::string_view kTokenizeMs = "tokenize_ms";
inline constexpr std::string_view kDetokenizeMs = "detokenize_ms";
inline constexpr std::string_view kFreqAfterMhz = "freq_after_mhz";
inline constexpr std::string_view kStop = "stop";
inline constexpr std::string_view kRecorder = "recorder";
inline constexpr std::array kAll{kSteps,        kNPrompt,      kNGenerated, kPeakRssKb, kLoadMs,
                                 kTtftMs,       kPrefillTokS,  kDecodeTokS, kWallMs,    kTokenizeMs,
                                 kDetokenizeMs, kFreqAfterMhz, kStop,       kRecorder};
}  // namespace footer_key

// Keys of the header's `run.numa` object (runtime/numa.h, docs/numa.md): the --numa policy, where
// the workers ran and what happened to the memory they stream.
namespace numa_key {
inline constexpr std::string_view kNuma = run_key::kNuma;  // the object's key under `run`
inline constexpr std::string_view kPolicy = "policy";
inline constexpr std::string_view kWorkerNode = "worker_node";
inline constexpr std::string_view kWorkersPerNode = "workers_per_node";
inline constexpr std::string_view kNode = "node";        // in workers_per_node[]
inline constexpr std::string_view kWorkers = "workers";  // in workers_per_node[]
inline constexpr std::string_view kMemoryNodes = "memory_nodes";
inline constexpr std::string_view kWeights = "weights";
inline constexpr std::string_view kKv = "kv";
inline constexpr std::string_view kWeightBytesOwned = "weight_bytes_owned";
inline constexpr std::string_view kWeightBytesFile = "weight_bytes_file";
inline constexpr std::string_view kWeightsOnNodePct = "weights_on_node_pct";
inline constexpr std::string_view kError = "error";
inline constexpr std::array kAll{
    kPolicy, kWorkerNode,       kWorkersPerNode,  kMemoryNodes,      kWeights,
    kKv,     kWeightBytesOwned, kWeightBytesFile, kWeightsOnNodePct, kError};
}  // namespace numa_key

// Keys of the footer's `recorder` object: the recorder's totals over the run.
namespace footer_recorder_key {
inline constexpr std::string_view kOps = "ops";
inline constexpr std::string_view kDroppedSlices = "dropped_slices";
inline constexpr std::string_view kUnattributedChunks = "unattributed_chunks";
inline constexpr std::string_view kThreads = "threads";
inline constexpr std::string_view kRunqReads = "runq_reads";
inline constexpr std::string_view kBytes = "bytes";
inline constexpr std::array kAll{kOps,     kDroppedSlices, kUnattributedChunks,
                                 kThreads, kRunqReads,     kBytes};
}  // namespace footer_recorder_key

// Keys of `bench` lines (pacer bench --events-out / -o jsonl: one result row each).
namespace bench_key {
inline constexpr std::string_view kTest = "test";
inline constexpr std::string_view kNPrompt = "n_prompt";
inline constexpr std::string_view kNGen = "n_gen";
inline constexpr std::string_view kNDepth = "n_depth";
inline constexpr std::string_view kThreads = "threads";
inline constexpr std::string_view kPin = "pin";
inline constexpr std::string_view kCpus = "cpus";
inline constexpr std::string_view kReps = "reps";
inline constexpr std::string_view kTokS = "tok_s";
inline constexpr std::string_view kTokSMean = "tok_s_mean";
inline constexpr std::string_view kTokSSd = "tok_s_sd";
inline constexpr std::string_view kCv = "cv";
inline constexpr std::string_view kFlags = "flags";
inline constexpr std::string_view kFreqMhzMean = "freq_mhz_mean";
inline constexpr std::string_view kFreqMhzMin = "freq_mhz_min";
inline constexpr std::string_view kFreqMhzMax = "freq_mhz_max";
inline constexpr std::string_view kBandwidthGbs = "bandwidth_gbs";
inline constexpr std::string_view kCeilingTokS = "ceiling_tok_s";
inline constexpr std::string_view kRooflinePct = "roofline_pct";
inline constexpr std::string_view kRooflineApplies = "roofline_applies";
inline constexpr std::string_view kBandwidthMethod = "bandwidth_method";
inline constexpr std::string_view kBandwidthBeforeGbs = "bandwidth_before_gbs";
inline constexpr std::string_view kBandwidthAfterGbs = "bandwidth_after_gbs";
inline constexpr std::string_view kBandwidthBetweenGbs = "bandwidth_between_gbs";
inline constexpr std::string_view kRooflineRepPct = "roofline_rep_pct";
inline constexpr std::string_view kRooflineRepP50Pct = "roofline_rep_p50_pct";
inline constexpr std::string_view kLlcBytes = "llc_bytes";
inline constexpr std::string_view kLlcMethod = "llc_method";
inline constexpr std::string_view kKvBytesPerToken = "kv_bytes_per_token";
inline constexpr std::string_view kAttentionFlopsPerToken = "attention_flops_per_token";
inline constexpr std::string_view kFmaGflops = "fma_gflops";
inline constexpr std::string_view kFmaMethod = "fma_method";
inline constexpr std::string_view kBandwidthCeilingTokS = "bandwidth_ceiling_tok_s";
// The matmul kernels' ceiling with their weights in cache (runtime/kernel_ceiling.h) and the row
// against it.
inline constexpr std::string_view kKernelCeilingTokS = "kernel_ceiling_tok_s";
inline constexpr std::string_view kKernelPct = "kernel_pct";
inline constexpr std::string_view kKernelCeilingMethod = "kernel_ceiling_method";
inline constexpr std::string_view kEvents = "events";
inline constexpr std::string_view kModel = "model";
inline constexpr std::string_view kArch = "arch";
inline constexpr std::string_view kWtype = "wtype";
inline constexpr std::array kAll{kTest,
                                 kNPrompt,
                                 kNGen,
                                 kNDepth,
                                 kThreads,
                                 kPin,
                                 kCpus,
                                 kReps,
                                 kTokS,
                                 kTokSMean,
                                 kTokSSd,
                                 kCv,
                                 kFlags,
                                 kFreqMhzMean,
                                 kFreqMhzMin,
                                 kFreqMhzMax,
                                 kBandwidthGbs,
                                 kCeilingTokS,
                                 kRooflinePct,
                                 kRooflineApplies,
                                 kBandwidthMethod,
                                 kBandwidthBeforeGbs,
                                 kBandwidthAfterGbs,
                                 kBandwidthBetweenGbs,
                                 kRooflineRepPct,
                                 kRooflineRepP50Pct,
                                 kLlcBytes,
                                 kLlcMethod,
                                 kKvBytesPerToken,
                                 kAttentionFlopsPerToken,
                                 kFmaGflops,
                                 kFmaMethod,
                                 kBandwidthCeilingTokS,
                                 kKernelCeilingTokS,
                                 kKernelPct,
                                 kKernelCeilingMethod,
                                 kEvents,
                                 kModel,
                                 kArch,
                                 kWtype};
}  // namespace bench_key

// Keys of an op worker's `counters` object (docs/event-log.md `op`). Hardware and software events
// by these names; user events (--events) appear under their libpfm4 names.
namespace counter_key {
inline constexpr std::string_view kInstructions = "instructions";
inline constexpr std::string_view kCycles = "cycles";
inline constexpr std::string_view kRefCycles = "ref_cycles";
inline constexpr std::string_view kLlcMisses = "llc_misses";
inline constexpr std::string_view kBranchMisses = "branch_misses";
inline constexpr std::string_view kTaskClockNs = "task_clock_ns";
inline constexpr std::string_view kContextSwitches = "context_switches";
inline constexpr std::string_view kCpuMigrations = "cpu_migrations";
inline constexpr std::string_view kPageFaults = "page_faults";
// Not a counter: the smallest fraction of time a multiplexed hardware group counted (< 1 only).
inline constexpr std::string_view kMux = "mux";
// The schedstat run-delay source's key; written as the worker field `runq_ns`, never in counters.
inline constexpr std::string_view kRunqNs = "runq_ns";
// The counters pacer's own sources count (user events come on top, under their libpfm4 names).
inline constexpr std::array kStandard{kInstructions,    kCycles,        kRefCycles,
                                      kLlcMisses,       kBranchMisses,  kTaskClockNs,
                                      kContextSwitches, kCpuMigrations, kPageFaults};
}  // namespace counter_key

}  // namespace pacer::eventlog
