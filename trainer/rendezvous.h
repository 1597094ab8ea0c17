// Who is in the job and how its ranks find each other: the launcher's variables and a Gloo
// store (a directory on a shared file system, or Redis across nodes).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/launch_env.h"
#include "base/status.h"

namespace gloo::rendezvous {
class Store;
}

namespace rankscope::trainer {

struct World {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string launcher;  // "torchrun", "slurm", "openmpi", "pmi", or "none"
};

// From torchrun, Slurm or Open MPI variables (base/launch_env.h). Without a launcher the
// process is rank 0 of 1. A rank without a world size is an error.
Result<World> DetectWorld(const GetEnv& get_env);

struct RendezvousSpec {
  std::string file_dir;    // file:DIR
  std::string redis_host;  // redis://HOST:PORT
  int redis_port = 0;
  // A private directory made for a lone rank: removed when its Rendezvous is destroyed.
  bool remove_when_done = false;
  std::string Describe() const;  // "file:DIR" or "redis://HOST:PORT", for messages
};

// "file:DIR" or "redis://HOST:PORT"; anything else is an error naming the accepted forms.
Result<RendezvousSpec> ParseRendezvous(std::string_view text);

// The default: file:$RANKSCOPE_RUN_DIR/rendezvous under `rankscope profile`, otherwise
// file:${TMPDIR:-/tmp}/rankscope-rendezvous-<job> where <job> comes from
// TORCHELASTIC_RUN_ID, SLURM_JOB_ID(.SLURM_STEP_ID) or MASTER_ADDR-MASTER_PORT. Without any
// of these a multi-rank job must pass --rdzv: an error says so.
Result<RendezvousSpec> DefaultRendezvous(const GetEnv& get_env);

// The job's name for namespacing store keys: RANKSCOPE_RUN_ID, TORCHELASTIC_RUN_ID (except
// torchrun's default "none", which every run shares; with "/restart-N" appended from
// TORCHELASTIC_RESTART_COUNT), SLURM_JOB_ID.SLURM_STEP_ID or MASTER_ADDR:MASTER_PORT;
// empty when none is set.
std::string JobKey(const GetEnv& get_env);

// A connected store, with keys namespaced to this job (so an old job's files in the same
// directory are never read), on which every rank has checked in and agreed on the world
// size. Connect fails with one clear line when the store is unreachable, when ranks
// disagree on the world size, or when a rank does not check in within the timeout (naming
// the missing ranks).
//
// Stale keys. Gloo's stores never delete or overwrite a key, so a directory (or Redis
// database) can hold the keys of earlier runs under the same job key, e.g. a rerun with the
// same --rdzv file:DIR and no job id. Every run therefore works in a fresh generation
// g0, g1, ... under its job key: rank 0 opens the first generation not yet taken; the
// other ranks join the newest one with a random nonce, and a generation counts as theirs
// only when rank 0's "ready" record in it carries their nonce. A rank that reads an older
// run's generation first sees no ready record with its nonce (or finds its rank already
// taken there) and moves on to the newer generation as soon as rank 0 opens it. Old
// generations stay in the store (a few small files per run); the directory may be
// deleted between runs. Two jobs running at once with the same store and job key are not
// supported.
//
// Set, Get and MissingRanks may be called from any thread; calls are serialized.
class Rendezvous {
 public:
  // The job key comes from the process environment (JobKey(ProcessEnv())).
  static Result<std::unique_ptr<Rendezvous>> Connect(const RendezvousSpec& spec,
                                                     const World& world,
                                                     std::chrono::milliseconds timeout);
  // The same with an explicit job key (tests, benchmarks, callers with their own id).
  static Result<std::unique_ptr<Rendezvous>> Connect(const RendezvousSpec& spec,
                                                     const World& world,
                                                     std::chrono::milliseconds timeout,
                                                     const std::string& job_key);
  ~Rendezvous();

  // A key can be set once per run (an error says if it already is).
  Status Set(const std::string& key, std::span<const uint8_t> value);
  // Waits up to the timeout for the key.
  Result<std::vector<uint8_t>> Get(const std::string& key);
  // The underlying store, for gloo contexts; keys set here are already namespaced.
  gloo::rendezvous::Store& store();
  const World& world() const;
  std::chrono::milliseconds timeout() const;

  // After a collective failed: every surviving rank checks in under `round`; the ranks
  // that do not within `grace` are returned (ascending). Used to name a dead rank. A round
  // name is used once per run by each rank (e.g. "<group>/failed"); if the store itself
  // fails, nobody can be named and the result is empty. `members` (world ranks, this rank
  // among them) limits the round to one process group's ranks; empty: every rank.
  std::vector<int> MissingRanks(const std::string& round, std::chrono::milliseconds grace,
                                std::span<const int> members = {});

  // A fresh key namespace for one process group, "<kind>-<n>". Every rank must create its
  // groups in the same order so that they get the same names.
  std::string NewNamespace(std::string_view kind);

 private:
  struct State;
  explicit Rendezvous(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace rankscope::trainer
