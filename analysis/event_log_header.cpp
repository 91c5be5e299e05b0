// The `header` record: typed fields out of the parsed JSON object. Absent or null values stay
// empty; a value of the wrong type is an error naming the field.
#include <fmt/format.h>

#include "analysis/event_log.h"
#include "eventlog/schema.h"

namespace pacer::analysis {
namespace {

using nlohmann::json;

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void wrong_type(std::string_view where, const char* key, const char* expected) {
  throw std::runtime_error(fmt::format("field \"{}{}\": expected {}", where, key, expected));
}

void take(const json& obj, std::string_view where, const char* key, std::string& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (!v->is_string()) wrong_type(where, key, "a string");
  out = v->get<std::string>();
}

void take(const json& obj, std::string_view where, const char* key, std::optional<int64_t>& out) {
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

void take(const json& obj, std::string_view where, const char* key, std::optional<double>& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (!v->is_number()) wrong_type(where, key, "a number");
  out = v->get<double>();
}

void take(const json& obj, std::string_view where, const char* key, std::optional<bool>& out) {
  const json* v = member(obj, key);
  if (!v) return;
  if (!v->is_boolean()) wrong_type(where, key, "true or false");
  out = v->get<bool>();
}

template <class T>
void take_array(const json& obj, std::string_view where, const char* key, std::vector<T>& out) {
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

const json& object_or_empty(const json& obj, const char* key) {
  static const json kEmpty = json::object();
  const json* v = member(obj, key);
  if (!v) return kEmpty;
  if (!v->is_object()) wrong_type("", key, "an object");
  return *v;
}

}  // namespace

void parse_header_json(const json& j, Header& h) {
  h.schema = j.at("schema").get<int>();
  take(j, "", "pacer_version", h.pacer_version);
  take(j, "", "git_sha", h.git_sha);
  take(j, "", "time_utc", h.time_utc);
  take(j, "", "command", h.command);
  take_array(j, "", "argv", h.argv);

  const json& m = object_or_empty(j, "model");
  take(m, "model.", "path", h.model.path);
  take(m, "model.", "name", h.model.name);
  take(m, "model.", "arch", h.model.arch);
  take(m, "model.", "type", h.model.type);
  take(m, "model.", "params", h.model.params);
  take(m, "model.", "bytes", h.model.bytes);
  take(m, "model.", "matmul_bytes_per_token", h.model.matmul_bytes_per_token);
  take(m, "model.", "n_layers", h.model.n_layers);
  take(m, "model.", "n_embd", h.model.n_embd);
  take(m, "model.", "n_heads", h.model.n_heads);
  take(m, "model.", "n_kv_heads", h.model.n_kv_heads);
  take(m, "model.", "n_ff", h.model.n_ff);
  take(m, "model.", "n_vocab", h.model.n_vocab);

  const json& r = object_or_empty(j, "run");
  take(r, "run.", "threads", h.run.threads);
  take(r, "run.", "pin", h.run.pin);
  take_array(r, "run.", "cpus", h.run.cpus);
  take(r, "run.", "ctx", h.run.ctx);
  take(r, "run.", "n_prompt", h.run.n_prompt);
  take(r, "run.", "n_predict", h.run.n_predict);
  take(r, "run.", "seed", h.run.seed);
  take(r, "run.", "temperature", h.run.temperature);
  take(r, "run.", "isa", h.run.isa);
  take(r, "run.", "kv_type", h.run.kv_type);
  take(r, "run.", "recording", h.run.recording);
  // The schema's keys are string literals, so data() is NUL-terminated.
  if (const json* numa = member(r, eventlog::numa_key::kNuma.data())) {
    take(*numa, "run.numa.", eventlog::numa_key::kPolicy.data(), h.run.numa);
  }

  const json& host = object_or_empty(j, "host");
  take(host, "host.", "hostname", h.host.hostname);
  take(host, "host.", "cpu_model", h.host.cpu_model);
  take(host, "host.", "microcode", h.host.microcode);
  take(host, "host.", "kernel", h.host.kernel);
  take(host, "host.", "governor", h.host.governor);
  take(host, "host.", "smt", h.host.smt);
  take(host, "host.", "virtualized", h.host.virtualized);
  take(host, "host.", "tsc_mhz", h.host.tsc_mhz);
  take_array(host, "host.", "allowed_cpus", h.host.allowed_cpus);
  if (const json* topo = member(host, "topology")) {
    take(*topo, "host.topology.", "packages", h.host.packages);
    take(*topo, "host.topology.", "numa_nodes", h.host.numa_nodes);
    take(*topo, "host.topology.", "cores", h.host.cores);
    take(*topo, "host.topology.", "pus", h.host.pus);
    take(*topo, "host.topology.", "l3_bytes", h.host.l3_bytes);
  }

  const json& c = object_or_empty(j, "counters");
  take(c, "counters.", "mode", h.counters.mode);
  take_array(c, "counters.", "live", h.counters.live);
  take(c, "counters.", "read", h.counters.read);
  take(c, "counters.", "scope", h.counters.scope);
  take(c, "counters.", "software_scope", h.counters.software_scope);
  if (const json* un = member(c, "unavailable")) {
    if (!un->is_array()) wrong_type("counters.", "unavailable", "an array");
    for (const json& e : *un) {
      UnavailableCounter u;
      take(e, "counters.unavailable.", "event", u.event);
      take(e, "counters.unavailable.", "reason", u.reason);
      h.counters.unavailable.push_back(std::move(u));
    }
  }

  const json& f = object_or_empty(j, "frequency");
  take(f, "frequency.", "source", h.frequency.source);
  take(f, "frequency.", "detail", h.frequency.detail);
  take(f, "frequency.", "nominal_mhz", h.frequency.nominal_mhz);

  const json& t = object_or_empty(j, "thermal");
  take(t, "thermal.", "throttle_counters", h.throttle_counters);
  take(t, "thermal.", "rapl", h.rapl);

  take(j, "", "bandwidth_gbs", h.bandwidth_gbs);
  take_array(j, "", "freq_before_mhz", h.freq_before_mhz);
  take(j, "", "load_ms", h.load_ms);
}

}  // namespace pacer::analysis
