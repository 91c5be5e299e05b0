#include "runtime/scenario.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/isa.h"
#include "runtime/interference.h"
#include "runtime/topology.h"

namespace pacer::runtime {
namespace {

namespace fs = std::filesystem;

struct KindInfo {
  ScenarioKind kind;
  std::string_view name, description;
};
constexpr std::array<KindInfo, 6> kKinds = {{
    {ScenarioKind::Equal, "equal", "nothing: the same run twice (the control)"},
    {ScenarioKind::RunQueue, "runq", "a busy-loop thread pinned to each worker CPU"},
    {ScenarioKind::Quota, "quota", "a cgroup CPU quota of a quarter CPU per worker thread"},
    {ScenarioKind::MemoryBandwidth, "membw",
     "a memory-copying thread on each CPU the workers do not use"},
    {ScenarioKind::Threads, "threads", "one worker thread more (or fewer when no CPU is free)"},
    {ScenarioKind::Isa, "isa", "PACER_ISA one tier lower than this CPU's best"},
}};

const KindInfo& info(ScenarioKind k) {
  for (const KindInfo& i : kKinds)
    if (i.kind == k) return i;
  return kKinds[0];
}

std::string first_line_of(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  // The last non-empty line: an error is printed last.
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

struct ChildRun {
  std::vector<std::string> args;     // argv[1..]
  std::vector<std::string> env_add;  // NAME=value, added to this process's environment
  const CpuQuotaGroup* group = nullptr;
  fs::path out, err;
};

// fork + exec of `exe args...` with stdout/stderr to files; the child joins `group` before it
// execs (only async-signal-safe calls between fork and exec). Throws on a failed run.
void run_child(const std::string& exe, const ChildRun& run) {
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), run.args.begin(), run.args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  for (const std::string& add : run.env_add) {
    const std::string name = add.substr(0, add.find('=') + 1);
    std::erase_if(env_s, [&](const std::string& e) { return e.rfind(name, 0) == 0; });
    env_s.push_back(add);
  }
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out = run.out.string(), err = run.err.string();
  const std::string procs = run.group ? run.group->procs_file() : std::string();

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    const int fo = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int fe = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) _exit(126);
    dup2(fo, 1);
    dup2(fe, 2);
    if (!procs.empty()) {
      // Join the quota group: write "0" (this process) to its cgroup.procs.
      const int fd = open(procs.c_str(), O_WRONLY);
      if (fd < 0 || write(fd, "0", 1) != 1) {
        static const char msg[] = "pacer scenario: cannot join the quota cgroup\n";
        [[maybe_unused]] auto n = write(2, msg, sizeof(msg) - 1);
        _exit(125);
      }
      close(fd);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  const std::string why = first_line_of(run.err);
  throw std::runtime_error(fmt::format("`pacer {}` failed ({}){}", fmt::join(run.args, " "),
                                       WIFEXITED(status)
                                           ? fmt::format("exit {}", WEXITSTATUS(status))
                                           : fmt::format("signal {}", WTERMSIG(status)),
                                       why.empty() ? "" : ": " + why));
}

std::vector<std::string> run_args(const ScenarioOptions& o, int threads, const fs::path& log) {
  return {"run",
          "-m",
          o.model,
          "-p",
          o.prompt,
          "-n",
          std::to_string(o.n_predict),
          "-t",
          std::to_string(threads),
          "--pin",
          "compact",
          "--temp",
          "0",
          "--ignore-eos",
          "--events-out",
          log.string()};
}

}  // namespace

std::optional<ScenarioKind> parse_scenario_kind(std::string_view name) {
  for (const KindInfo& i : kKinds)
    if (i.name == name) return i.kind;
  return std::nullopt;
}

std::string_view scenario_name(ScenarioKind kind) noexcept {
  return info(kind).name;
}

std::vector<std::string_view> scenario_names() {
  std::vector<std::string_view> out;
  for (const KindInfo& i : kKinds) out.push_back(i.name);
  return out;
}

std::string_view scenario_description(ScenarioKind kind) noexcept {
  return info(kind).description;
}

std::vector<std::string> scenario_expected_causes(ScenarioKind kind) {
  switch (kind) {
    case ScenarioKind::Equal:
      // No difference, or interference from the host or co-tenants: never code or configuration.
      return {"none",      "vm steal",         "run queue",   "cpu quota",
              "frequency", "memory bandwidth", "interference"};
    case ScenarioKind::RunQueue:
      return {"run queue"};
    case ScenarioKind::Quota:
      return {"cpu quota"};
    case ScenarioKind::MemoryBandwidth:
      return {"memory bandwidth"};
    case ScenarioKind::Threads:
    case ScenarioKind::Isa:
      return {"configuration"};
  }
  return {};
}

ScenarioRuns run_scenario(const ScenarioOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const Topology topo = Topology::detect();
  const auto allowed = static_cast<int>(topo.allowed_cpus.size());
  const PinSpec compact = PinSpec::parse("compact");
  int threads = o.threads;
  if (threads <= 0) {
    threads = resolve_threads(topo, compact, -1);
    if (o.kind == ScenarioKind::MemoryBandwidth) threads = std::min(threads, allowed - 1);
  }
  if (threads < 1)
    throw std::runtime_error(fmt::format(
        "scenario {} needs a CPU the workers do not use, and this process may run on {} CPU(s) "
        "only",
        scenario_name(o.kind), allowed));
  ScenarioRuns r;
  r.threads = threads;
  r.worker_cpus = assign_cpus(topo, compact, threads);
  std::vector<int> free_cpus;
  for (int cpu : topo.allowed_cpus)
    if (std::find(r.worker_cpus.begin(), r.worker_cpus.end(), cpu) == r.worker_cpus.end())
      free_cpus.push_back(cpu);

  // Everything that can refuse is checked before the first run.
  int abnormal_threads = threads;
  std::vector<std::string> env_add;
  std::optional<CpuQuotaGroup> group, control_group;
  switch (o.kind) {
    case ScenarioKind::MemoryBandwidth:
      if (free_cpus.empty())
        throw std::runtime_error(fmt::format(
            "scenario membw needs a CPU the workers do not use: {} thread(s) take every allowed "
            "CPU; use -t {}",
            threads, std::max(1, allowed - 1)));
      break;
    case ScenarioKind::Threads:
      if (threads + 1 <= allowed) {
        abnormal_threads = threads + 1;
      } else if (threads >= 2) {
        abnormal_threads = threads - 1;
      } else {
        throw std::runtime_error("scenario threads needs 2 CPUs or 2 threads to change");
      }
      break;
    case ScenarioKind::Isa: {
      const ops::Isa best = ops::detect_isa();
      if (best == ops::Isa::Scalar)
        throw std::runtime_error(
            "scenario isa needs a CPU with AVX2 or AVX-512: this one runs the scalar tier only "
            "(or PACER_ISA chose it)");
      const ops::Isa lower = best == ops::Isa::Avx512 ? ops::Isa::Avx2 : ops::Isa::Scalar;
      env_add.push_back(fmt::format("PACER_ISA={}", ops::isa_name(lower)));
      break;
    }
    case ScenarioKind::Quota: {
      std::string why;
      // A quarter CPU per thread: below what the workers get even on a busy host, so the quota
      // binds (at half a CPU per thread, a host already taking half the CPUs left it idle).
      group = CpuQuotaGroup::create(0.25 * threads, &why);
      if (!group) throw std::runtime_error("scenario quota: " + why);
      // The normal run goes into a group too, without a quota: group scheduling then treats the
      // two runs alike (a lone group competes with the root's tasks as one entity).
      control_group = CpuQuotaGroup::create(0, &why);
      if (!control_group) throw std::runtime_error("scenario quota: " + why);
      break;
    }
    default:
      break;
  }

  fs::create_directories(o.dir);
  r.normal_log = o.dir / "normal.jsonl";
  r.abnormal_log = o.dir / "abnormal.jsonl";
  say(fmt::format("normal run: {} thread(s) on CPUs {}", threads, format_cpu_list(r.worker_cpus)));
  run_child(o.pacer_exe, {run_args(o, threads, r.normal_log),
                          {},
                          control_group ? &*control_group : nullptr,
                          o.dir / "normal.out",
                          o.dir / "normal.err"});

  ChildRun abnormal{run_args(o, abnormal_threads, r.abnormal_log), env_add, nullptr,
                    o.dir / "abnormal.out", o.dir / "abnormal.err"};
  std::unique_ptr<CpuHogs> hogs;
  std::unique_ptr<MemoryStreamers> streamers;
  switch (o.kind) {
    case ScenarioKind::Equal:
      r.injected = "nothing (the control)";
      break;
    case ScenarioKind::RunQueue:
      hogs = std::make_unique<CpuHogs>(r.worker_cpus, 1);
      r.injected = fmt::format("a busy loop on each of CPUs {}", format_cpu_list(r.worker_cpus));
      break;
    case ScenarioKind::Quota:
      abnormal.group = &*group;
      r.injected = group->describe();
      break;
    case ScenarioKind::MemoryBandwidth:
      streamers = std::make_unique<MemoryStreamers>(free_cpus, size_t{256} << 20);
      r.injected = fmt::format("a thread copying 256 MiB buffers on each of CPUs {}",
                               format_cpu_list(free_cpus));
      break;
    case ScenarioKind::Threads:
      r.injected = fmt::format("{} threads instead of {}", abnormal_threads, threads);
      break;
    case ScenarioKind::Isa:
      r.injected = env_add.front();
      break;
  }
  // Let the scheduler see the co-runners first; the streamers must be streaming for real (their
  // buffers allocated and touched, one full copy done) before the run starts: a short run that
  // began while they were still faulting in their pages saw no contention.
  if (hogs) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (streamers) {
    const size_t warm = free_cpus.size() * (size_t{256} << 20);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (streamers->bytes_copied() < warm && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  say("abnormal run: " + r.injected);
  run_child(o.pacer_exe, abnormal);
  return r;
}

}  // namespace pacer::runtime
