// Which rank a process is, read from the launcher's environment, and the collector's own
// configuration variables.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/launch_env.h"
#include "base/status.h"
#include "trace/trace_selection.h"

namespace rankscope::collector {

using rankscope::DetectRank;
using rankscope::GetEnv;
using rankscope::RankEnv;

using trace::TraceSelection;

struct CollectorConfig {
  std::string run_dir;  // RANKSCOPE_RUN_DIR; empty: the collector stays inert
  std::string run_id;   // RANKSCOPE_RUN_ID
  TraceSelection trace = TraceSelection::All();  // RANKSCOPE_TRACE; unset: everything
  std::string clock_override;  // RANKSCOPE_CLOCK: "", "tsc" or "realtime"
  size_t buffer_bytes = size_t{256} << 20;  // RANKSCOPE_BUFFER_MB
  // RANKSCOPE_PROGRESS_FILE=1 (set by `rankscope profile --hang-timeout`): keep
  // <rank file>.progress up to date for the launcher's hang watch.
  bool progress_file = false;
  RankEnv rank;
};

Result<CollectorConfig> ReadConfig(const GetEnv& get_env);

}  // namespace rankscope::collector
