// Which rank a process is, read from its launcher's environment. Shared by the collector
// (to name its rank file) and the trainer (to join its process group).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status.h"

namespace rankscope {

// Ranks and world sizes above this are rejected as typos.
inline constexpr int kMaxWorldSize = 1 << 20;

using GetEnv = std::function<const char*(const char*)>;
// The process environment (std::getenv).
GetEnv ProcessEnv();

struct RankEnv {
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::optional<int> local_world_size;  // ranks on this node, when the launcher says
  std::string source;  // the launcher whose variables were used: "torchrun", "slurm", ...
};

// First match wins: RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun),
// SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NTASKS_PER_NODE, OMPI_COMM_WORLD_RANK/_SIZE/
// _LOCAL_RANK/_LOCAL_SIZE, PMI_RANK/PMI_SIZE. A family counts only when its rank variable is
// a valid integer in [0, kMaxWorldSize); a bad value is an error, so a typo is not silently
// taken for "no launcher".
Result<RankEnv> DetectRank(const GetEnv& get_env);

}  // namespace rankscope
