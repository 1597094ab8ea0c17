// Which rank a process is, read from the launcher's environment, and the collector's own
// configuration variables.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "trace/trace_selection.h"

namespace rankscope::collector {

using GetEnv = std::function<const char*(const char*)>;

struct RankEnv {
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::string source;  // the launcher whose variables were used: "torchrun", "slurm", ...
};

// First match wins: RANK/WORLD_SIZE/LOCAL_RANK (torchrun), SLURM_PROCID/SLURM_NTASKS/
// SLURM_LOCALID, OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK, PMI_RANK/PMI_SIZE. A family counts
// only when its rank variable is a valid integer in [0, kMaxWorldSize); a bad value is an
// error, so a typo is not silently recorded as rank-unknown.
Result<RankEnv> DetectRank(const GetEnv& get_env);

using trace::TraceSelection;

struct CollectorConfig {
  std::string run_dir;  // RANKSCOPE_RUN_DIR; empty: the collector stays inert
  std::string run_id;   // RANKSCOPE_RUN_ID
  TraceSelection trace = TraceSelection::All();  // RANKSCOPE_TRACE; unset: everything
  std::string clock_override;  // RANKSCOPE_CLOCK: "", "tsc" or "realtime"
  size_t buffer_bytes = size_t{256} << 20;  // RANKSCOPE_BUFFER_MB
  RankEnv rank;
};

Result<CollectorConfig> ReadConfig(const GetEnv& get_env);

}  // namespace rankscope::collector
