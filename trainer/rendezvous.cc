#include "trainer/rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <gloo/rendezvous/prefix_store.h>

#include "base/text.h"
#include "trainer/comm_store.h"
#include "trainer/comm_util.h"

namespace rankscope::trainer {
namespace {

using Clock = std::chrono::steady_clock;
using comm::FormatDuration;
using comm::FromBytes;
using comm::RankList;
using comm::ToBytes;

constexpr auto kHandshakePoll = std::chrono::milliseconds(10);
constexpr char kRdzvForms[] = "expected file:DIR or redis://HOST:PORT";

// The variables each launcher family of DetectRank uses, for messages.
struct LauncherVariables {
  const char* source;
  const char* rank;
  const char* size;
};
constexpr LauncherVariables kLauncherVariables[] = {
    {"torchrun", "RANK", "WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE"},
};

std::string_view Env(const GetEnv& get_env, const char* name) {
  const char* value = get_env(name);
  return value == nullptr ? std::string_view() : std::string_view(value);
}

// Keeps a job name usable in a file name and a store key.
std::string SafeName(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 128)) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_' || c == ':';
    out += keep ? c : '_';
  }
  return out;
}

// The launcher's job name, with `separator` between MASTER_ADDR and MASTER_PORT.
std::string LauncherJobName(const GetEnv& get_env, std::string_view separator) {
  const std::string_view elastic = Env(get_env, "TORCHELASTIC_RUN_ID");
  if (!elastic.empty() && elastic != "none") return std::string(elastic);
  const std::string_view slurm_job = Env(get_env, "SLURM_JOB_ID");
  if (!slurm_job.empty()) {
    const std::string_view step = Env(get_env, "SLURM_STEP_ID");
    return step.empty() ? std::string(slurm_job) : fmt::format("{}.{}", slurm_job, step);
  }
  const std::string_view addr = Env(get_env, "MASTER_ADDR");
  const std::string_view port = Env(get_env, "MASTER_PORT");
  if (!addr.empty() && !port.empty()) return fmt::format("{}{}{}", addr, separator, port);
  return "";
}

std::optional<int> ParseInt(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

std::string MakeNonce() {
  std::random_device device;
  const uint64_t random = (static_cast<uint64_t>(device()) << 32) ^ device();
  const auto now = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  return fmt::format("{:016x}", random ^ (now * 0x9e3779b97f4a7c15ULL) ^
                                    (static_cast<uint64_t>(getpid()) << 40));
}

// ---- The generation handshake (see rendezvous.h) ----
//
// Keys under "rankscope/<job>/g<n>/":
//   open       rank 0: "<world size> <nonce>"
//   join/<r>   rank r > 0: "<world size> <nonce>"
//   ready      rank 0: "<ok|mismatch|timeout> <world size>\n<nonce of rank 1 or -> ...\n<message>"
//   kv/...     Rendezvous::Set/Get and the process groups' keys
//   missing/<round>/<r>   MissingRanks check-ins

struct Keys {
  std::string job;  // "rankscope/<job>"
  std::string Generation(int n) const { return fmt::format("{}/g{}", job, n); }
  std::string Open(int n) const { return Generation(n) + "/open"; }
  std::string Join(int n, int rank) const { return fmt::format("{}/join/{}", Generation(n), rank); }
  std::string Ready(int n) const { return Generation(n) + "/ready"; }
};

struct CheckIn {
  int world_size = 0;
  std::string nonce;
};

std::optional<CheckIn> ParseCheckIn(const std::string& text) {
  const std::vector<std::string_view> parts = Split(text, ' ');
  if (parts.size() != 2) return std::nullopt;
  const std::optional<int> world_size = ParseInt(parts[0]);
  if (!world_size || *world_size < 1) return std::nullopt;
  return CheckIn{*world_size, std::string(parts[1])};
}

struct Ready {
  std::string outcome;  // "ok", "mismatch" or "timeout"
  int world_size = 0;
  std::vector<std::string> nonces;  // index r - 1 for rank r
  std::string message;
};

std::string FormatReady(const Ready& ready) {
  std::string nonces;
  for (const std::string& nonce : ready.nonces) nonces += (nonces.empty() ? "" : " ") + nonce;
  return fmt::format("{} {}\n{}\n{}", ready.outcome, ready.world_size, nonces, ready.message);
}

std::optional<Ready> ParseReady(const std::string& text) {
  const std::vector<std::string_view> lines = Split(text, '\n');
  if (lines.size() < 3) return std::nullopt;
  const std::vector<std::string_view> head = Split(lines[0], ' ');
  if (head.size() != 2) return std::nullopt;
  Ready ready;
  ready.outcome = std::string(head[0]);
  const std::optional<int> world_size = ParseInt(head[1]);
  if (!world_size || *world_size < 1) return std::nullopt;
  ready.world_size = *world_size;
  if (!lines[1].empty()) {
    for (std::string_view nonce : Split(lines[1], ' ')) ready.nonces.emplace_back(nonce);
  }
  if (ready.nonces.size() != static_cast<size_t>(ready.world_size - 1)) return std::nullopt;
  ready.message = std::string(text.substr(lines[0].size() + lines[1].size() + 2));
  return ready;
}

// The newest generation opened under the job, -1 if none; `known` is one that exists.
// Generations are numbered without gaps, so doubling then bisecting finds the newest in
// O(log n) probes even after many reruns in the same directory.
int NewestGeneration(comm::SharedStore& store, const Keys& keys, int known) {
  if (!store.Has(keys.Open(known + 1))) return known;
  int low = known + 1;  // exists
  int step = 1;
  int high = low + step;
  while (store.Has(keys.Open(high))) {
    low = high;
    step *= 2;
    high = low + step;
  }
  while (high - low > 1) {  // low exists, high does not
    const int middle = low + (high - low) / 2;
    (store.Has(keys.Open(middle)) ? low : high) = middle;
  }
  return low;
}

struct Handshake {
  comm::SharedStore& store;
  Keys keys;
  World world;
  std::string nonce;
  std::chrono::milliseconds timeout;
  Clock::time_point deadline;

  std::string TimedOut(const std::string& what) const {
    return fmt::format("rendezvous timed out after {}: {} (store {})", FormatDuration(timeout),
                       what, store.spec().Describe());
  }

  // Rank 0: opens a new generation, waits for every rank's check-in, and publishes the
  // outcome so that the other ranks fail with the same reason as rank 0.
  Result<int> Lead() {
    int generation = NewestGeneration(store, keys, -1) + 1;
    while (store.Has(keys.Open(generation))) ++generation;
    store.set(keys.Open(generation), ToBytes(fmt::format("{} {}", world.world_size, nonce)));

    Ready ready{"ok", world.world_size, std::vector<std::string>(world.world_size - 1, "-"), ""};
    auto publish = [&] { store.set(keys.Ready(generation), ToBytes(FormatReady(ready))); };
    std::vector<bool> joined(world.world_size, false);
    joined[0] = true;
    int waiting_for = world.world_size - 1;
    while (waiting_for > 0) {
      for (int rank = 1; rank < world.world_size; ++rank) {
        if (joined[rank] || !store.Has(keys.Join(generation, rank))) continue;
        const std::optional<CheckIn> check_in =
            ParseCheckIn(FromBytes(store.get(keys.Join(generation, rank))));
        if (!check_in) {
          return Corrupt(fmt::format("rendezvous store {}: rank {}'s check-in is unreadable",
                                     store.spec().Describe(), rank));
        }
        joined[rank] = true;
        --waiting_for;
        ready.nonces[rank - 1] = check_in->nonce;
        if (check_in->world_size != world.world_size) {
          ready.outcome = "mismatch";
          ready.message = fmt::format("world-size mismatch: rank 0 has WORLD_SIZE={}, rank {} has {}",
                                      world.world_size, rank, check_in->world_size);
          publish();
          return Inconsistent(fmt::format("world-size mismatch: this rank has WORLD_SIZE={}, rank {} has {}",
                                          world.world_size, rank, check_in->world_size));
        }
      }
      if (waiting_for == 0) break;
      if (Clock::now() >= deadline) {
        std::vector<int> missing;
        for (int rank = 1; rank < world.world_size; ++rank) {
          if (!joined[rank]) missing.push_back(rank);
        }
        ready.outcome = "timeout";
        ready.message = TimedOut(RankList(missing) + " did not join");
        publish();
        return Unavailable(ready.message);
      }
      std::this_thread::sleep_for(kHandshakePoll);
    }
    publish();
    return generation;
  }

  // Rank r > 0: joins the newest generation and waits for rank 0's ready record; one that
  // does not carry this rank's nonce belongs to an older run, so it waits for a newer one.
  Result<int> Follow() {
    const int rank = world.rank;
    int newest = -1;
    int joined = -1;
    while (true) {
      newest = NewestGeneration(store, keys, newest);
      if (newest >= 0) {
        if (joined != newest) {
          // A generation that is complete, or where this rank is already taken, is an
          // older run's: wait for rank 0 to open a newer one.
          const bool stale = store.Has(keys.Ready(newest)) || store.Has(keys.Join(newest, rank));
          if (!stale) {
            store.set(keys.Join(newest, rank),
                      ToBytes(fmt::format("{} {}", world.world_size, nonce)));
            joined = newest;
          }
        }
        if (joined == newest && store.Has(keys.Ready(newest))) {
          const std::optional<Ready> ready = ParseReady(FromBytes(store.get(keys.Ready(newest))));
          if (!ready) {
            return Corrupt(fmt::format("rendezvous store {}: rank 0's ready record is unreadable",
                                       store.spec().Describe()));
          }
          if (rank < ready->world_size && ready->nonces[rank - 1] == nonce) {
            if (ready->world_size != world.world_size) {
              return Inconsistent(fmt::format("world-size mismatch: this rank has WORLD_SIZE={}, rank 0 has {}",
                                              world.world_size, ready->world_size));
            }
            if (ready->outcome == "mismatch") return Inconsistent(ready->message);
            if (ready->outcome != "ok") return Unavailable(ready->message);
            return newest;
          }
        }
      }
      if (Clock::now() >= deadline) return FollowTimedOut(newest, joined);
      std::this_thread::sleep_for(kHandshakePoll);
    }
  }

  Status FollowTimedOut(int newest, int joined) {
    if (newest < 0) return Unavailable(TimedOut("rank 0 did not join"));
    const std::optional<CheckIn> opened = ParseCheckIn(FromBytes(store.get(keys.Open(newest))));
    if (opened && world.rank >= opened->world_size) {
      return Inconsistent(fmt::format("world-size mismatch: this rank has WORLD_SIZE={}, rank 0 has {}",
                                      world.world_size, opened->world_size));
    }
    if (joined != newest || !opened) {
      return Unavailable(TimedOut("rank 0 did not join (the store holds only older runs' rendezvous)"));
    }
    std::vector<int> missing;
    for (int rank = 1; rank < opened->world_size; ++rank) {
      if (!store.Has(keys.Join(newest, rank))) missing.push_back(rank);
    }
    if (missing.empty()) return Unavailable(TimedOut("rank 0 did not complete the rendezvous"));
    return Unavailable(TimedOut(RankList(missing) + " did not join"));
  }
};

Status ValidateWorld(const World& world) {
  if (world.world_size < 1 || world.world_size > kMaxWorldSize) {
    return InvalidArgument(fmt::format("world size {} is out of range", world.world_size));
  }
  if (world.rank < 0 || world.rank >= world.world_size) {
    return InvalidArgument(fmt::format("rank {} is not in a world of {}", world.rank, world.world_size));
  }
  return Status::Ok();
}

}  // namespace

Result<World> DetectWorld(const GetEnv& get_env) try {
  RS_ASSIGN_OR_RETURN(RankEnv found, DetectRank(get_env));
  World world;
  if (!found.rank) {
    world.launcher = "none";
    return world;
  }
  world.launcher = found.source;
  if (!found.world_size) {
    const char* rank_name = "the rank variable";
    const char* size_name = "the world-size variable";
    for (const LauncherVariables& variables : kLauncherVariables) {
      if (found.source == variables.source) {
        rank_name = variables.rank;
        size_name = variables.size;
      }
    }
    return InvalidArgument(fmt::format("{}={} is set but {} is not: the world size is unknown",
                                       rank_name, *found.rank, size_name));
  }
  world.rank = *found.rank;
  world.world_size = *found.world_size;
  // Launchers without local variables (PMI, Slurm without --ntasks-per-node) leave them out:
  // then this process counts as alone on its node.
  world.local_rank = found.local_rank.value_or(0);
  world.local_world_size = std::max(found.local_world_size.value_or(1), world.local_rank + 1);
  return world;
} catch (...) {
  return InternalError("DetectWorld: out of memory");
}

std::string RendezvousSpec::Describe() const {
  if (!file_dir.empty()) return "file:" + file_dir;
  const bool ipv6 = redis_host.find(':') != std::string::npos;
  return fmt::format("redis://{}{}{}:{}", ipv6 ? "[" : "", redis_host, ipv6 ? "]" : "", redis_port);
}

Result<RendezvousSpec> ParseRendezvous(std::string_view text) try {
  auto bad = [&](std::string_view why) {
    return InvalidArgument(fmt::format("--rdzv {}: {}{}{}{}", Printable(text, 200), kRdzvForms,
                                       why.empty() ? "" : " (", why, why.empty() ? "" : ")"));
  };
  RendezvousSpec spec;
  if (text.starts_with("file:")) {
    std::string_view dir = text.substr(5);
    if (dir.starts_with("///")) dir.remove_prefix(2);  // file:///abs/dir, URL style
    if (dir.empty()) return bad("the directory is empty");
    if (dir.find('\0') != std::string_view::npos) return bad("the directory contains a NUL byte");
    spec.file_dir = std::string(dir);
    return spec;
  }
  if (text.starts_with("redis://")) {
    std::string_view rest = text.substr(8);
    if (rest.ends_with("/")) rest.remove_suffix(1);
    std::string_view host;
    std::string_view port;
    if (rest.starts_with("[")) {  // [IPv6]:PORT
      const size_t close = rest.find(']');
      if (close == std::string_view::npos) return bad("unclosed '['");
      host = rest.substr(1, close - 1);
      if (rest.substr(close + 1).starts_with(":")) port = rest.substr(close + 2);
    } else {
      const size_t colon = rest.rfind(':');
      host = rest.substr(0, colon);
      if (colon != std::string_view::npos) port = rest.substr(colon + 1);
      if (host.find(':') != std::string_view::npos) return bad("write an IPv6 host as [HOST]");
    }
    if (host.empty()) return bad("the host is empty");
    if (port.empty()) return bad("the port is missing");
    const std::optional<int> port_number = ParseInt(port);
    if (!port_number || *port_number < 1 || *port_number > 65535) {
      return bad(fmt::format("port {} is not a number in 1..65535", Printable(port)));
    }
    spec.redis_host = std::string(host);
    spec.redis_port = *port_number;
    return spec;
  }
  return bad("");
} catch (...) {
  return InternalError("ParseRendezvous: out of memory");
}

Result<RendezvousSpec> DefaultRendezvous(const GetEnv& get_env) try {
  RendezvousSpec spec;
  const std::string_view run_dir = Env(get_env, "RANKSCOPE_RUN_DIR");
  if (!run_dir.empty()) {
    spec.file_dir = fmt::format("{}/rendezvous", run_dir);
    return spec;
  }
  std::string_view temp = Env(get_env, "TMPDIR");
  if (temp.empty()) temp = "/tmp";
  const std::string job = LauncherJobName(get_env, "-");
  if (!job.empty()) {
    spec.file_dir = fmt::format("{}/rankscope-rendezvous-{}", temp, SafeName(job));
    return spec;
  }
  RS_ASSIGN_OR_RETURN(World world, DetectWorld(get_env));
  if (world.world_size > 1) {
    return InvalidArgument(fmt::format(
        "a job of {} ranks needs --rdzv file:DIR (a directory every rank can reach) or "
        "--rdzv redis://HOST:PORT: none of RANKSCOPE_RUN_DIR, TORCHELASTIC_RUN_ID, SLURM_JOB_ID "
        "or MASTER_ADDR/MASTER_PORT is set to derive one from",
        world.world_size));
  }
  // A single rank meets nobody; its own directory keeps concurrent runs apart.
  spec.file_dir = fmt::format("{}/rankscope-rendezvous-single-{}", temp, getpid());
  spec.remove_when_done = true;
  return spec;
} catch (...) {
  return InternalError("DefaultRendezvous: out of memory");
}

std::string JobKey(const GetEnv& get_env) {
  const std::string_view run_id = Env(get_env, "RANKSCOPE_RUN_ID");
  if (!run_id.empty()) return std::string(run_id);
  std::string job = LauncherJobName(get_env, ":");
  // torchrun restarts all workers under the same run id: a worker of the previous attempt
  // that is still shutting down must not meet the new ones.
  const std::string_view restart = Env(get_env, "TORCHELASTIC_RESTART_COUNT");
  const std::string_view elastic = Env(get_env, "TORCHELASTIC_RUN_ID");
  if (!elastic.empty() && elastic != "none" && !restart.empty()) job += fmt::format("/restart-{}", restart);
  return job;
}

struct Rendezvous::State {
  RendezvousSpec spec;
  World world;
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<comm::SharedStore> shared;
  std::string generation;  // "rankscope/<job>/g<n>"
  std::unique_ptr<gloo::rendezvous::PrefixStore> kv;  // generation + "/kv"
  std::atomic<int> next_namespace{0};

  std::string KvKey(const std::string& key) const { return generation + "/kv/" + key; }
};

Rendezvous::Rendezvous(std::unique_ptr<State> state) : state_(std::move(state)) {}
Rendezvous::~Rendezvous() {
  if (state_ == nullptr || !state_->spec.remove_when_done || state_->spec.file_dir.empty()) return;
  const std::filesystem::path directory = state_->spec.file_dir;
  state_.reset();  // close the store before its files go
  std::error_code ignored;
  std::filesystem::remove_all(directory, ignored);
}

Result<std::unique_ptr<Rendezvous>> Rendezvous::Connect(const RendezvousSpec& spec,
                                                        const World& world,
                                                        std::chrono::milliseconds timeout) {
  return Connect(spec, world, timeout, JobKey(ProcessEnv()));
}

Result<std::unique_ptr<Rendezvous>> Rendezvous::Connect(const RendezvousSpec& spec,
                                                        const World& world,
                                                        std::chrono::milliseconds timeout,
                                                        const std::string& job_key) {
  try {
    RS_RETURN_IF_ERROR(ValidateWorld(world));
    if (timeout <= std::chrono::milliseconds::zero()) {
      return InvalidArgument("rendezvous timeout must be positive");
    }
    if (spec.file_dir.empty() && (spec.redis_host.empty() || spec.redis_port <= 0)) {
      return InvalidArgument(fmt::format("rendezvous: no store given; {}", kRdzvForms));
    }
    const Clock::time_point deadline = Clock::now() + timeout;
    RS_ASSIGN_OR_RETURN(std::unique_ptr<comm::SharedStore> shared,
                        comm::SharedStore::Open(spec, timeout));
    Handshake handshake{*shared,
                        Keys{"rankscope/" + (job_key.empty() ? std::string("-") : SafeName(job_key))},
                        world,
                        MakeNonce(),
                        timeout,
                        deadline};
    RS_ASSIGN_OR_RETURN(int generation, world.rank == 0 ? handshake.Lead() : handshake.Follow());

    auto state = std::make_unique<State>();
    state->spec = spec;
    state->world = world;
    state->timeout = timeout;
    state->generation = handshake.keys.Generation(generation);
    state->kv = std::make_unique<gloo::rendezvous::PrefixStore>(state->generation + "/kv", *shared);
    state->shared = std::move(shared);
    return std::unique_ptr<Rendezvous>(new Rendezvous(std::move(state)));
  } catch (const std::exception& e) {
    return IoError(fmt::format("rendezvous store {}: {}", spec.Describe(),
                               comm::CleanGlooMessage(e.what())));
  } catch (...) {
    return IoError(fmt::format("rendezvous store {}: unknown error", spec.Describe()));
  }
}

Status Rendezvous::Set(const std::string& key, std::span<const uint8_t> value) {
  try {
    const std::string full_key = state_->KvKey(key);
    if (state_->shared->Has(full_key)) {
      return AlreadyExists(fmt::format("rendezvous key {} is already set", Printable(key)));
    }
    // A marker byte first: Gloo's FileStore cannot hold an empty value.
    std::vector<char> data;
    data.reserve(value.size() + 1);
    data.push_back('v');
    data.insert(data.end(), value.begin(), value.end());
    state_->shared->set(full_key, data);
    return Status::Ok();
  } catch (const std::exception& e) {
    return IoError(fmt::format("rendezvous store {}: setting {}: {}", state_->spec.Describe(),
                               Printable(key), comm::CleanGlooMessage(e.what())));
  } catch (...) {
    return IoError(fmt::format("rendezvous store {}: setting {}: unknown error",
                               state_->spec.Describe(), Printable(key)));
  }
}

Result<std::vector<uint8_t>> Rendezvous::Get(const std::string& key) {
  try {
    const std::string full_key = state_->KvKey(key);
    if (!state_->shared->WaitFor({full_key}, Clock::now() + state_->timeout).empty()) {
      return Unavailable(fmt::format("rendezvous key {} was not set within {} (store {})",
                                     Printable(key), FormatDuration(state_->timeout),
                                     state_->spec.Describe()));
    }
    const std::vector<char> data = state_->shared->get(full_key);
    if (data.empty() || data.front() != 'v') {
      return Corrupt(fmt::format("rendezvous key {} holds an unexpected value", Printable(key)));
    }
    return std::vector<uint8_t>(data.begin() + 1, data.end());
  } catch (const std::exception& e) {
    return IoError(fmt::format("rendezvous store {}: getting {}: {}", state_->spec.Describe(),
                               Printable(key), comm::CleanGlooMessage(e.what())));
  } catch (...) {
    return IoError(fmt::format("rendezvous store {}: getting {}: unknown error",
                               state_->spec.Describe(), Printable(key)));
  }
}

gloo::rendezvous::Store& Rendezvous::store() { return *state_->kv; }

const World& Rendezvous::world() const { return state_->world; }

std::chrono::milliseconds Rendezvous::timeout() const { return state_->timeout; }

std::vector<int> Rendezvous::MissingRanks(const std::string& round, std::chrono::milliseconds grace,
                                          std::span<const int> members) {
  try {
    const World& world = state_->world;
    auto key = [&](int rank) {
      return fmt::format("{}/missing/{}/{}", state_->generation, round, rank);
    };
    if (!state_->shared->Has(key(world.rank))) state_->shared->set(key(world.rank), ToBytes("here"));
    std::vector<int> others;
    std::vector<std::string> keys;
    const auto consider = [&](int rank) {
      if (rank == world.rank) return;
      others.push_back(rank);
      keys.push_back(key(rank));
    };
    if (members.empty()) {
      for (int rank = 0; rank < world.world_size; ++rank) consider(rank);
    } else {
      for (int rank : members) consider(rank);
    }
    std::vector<int> missing;
    for (size_t index : state_->shared->WaitFor(keys, Clock::now() + grace)) {
      missing.push_back(others[index]);
    }
    return missing;
  } catch (...) {
    return {};  // the store failed too: nobody can be named
  }
}

std::string Rendezvous::NewNamespace(std::string_view kind) {
  return fmt::format("{}-{}", kind, state_->next_namespace.fetch_add(1));
}

}  // namespace rankscope::trainer
