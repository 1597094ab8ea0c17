#include "collector/rank_env.h"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "base/launch_env.h"
#include "base/text.h"
#include "trace/run_dir.h"

namespace rankscope::collector {
Result<CollectorConfig> ReadConfig(const GetEnv& get_env) {
  CollectorConfig config;
  auto text = [&](const char* name) {
    const char* value = get_env(name);
    return std::string(value != nullptr ? value : "");
  };
  config.run_dir = text("RANKSCOPE_RUN_DIR");
  if (config.run_dir.empty()) return config;
  config.run_id = text("RANKSCOPE_RUN_ID");
  if (!trace::IsValidRunId(config.run_id)) {
    return InvalidArgument(fmt::format("RANKSCOPE_RUN_ID={} is not a valid run id",
                                       Printable(config.run_id)));
  }
  if (std::string list = text("RANKSCOPE_TRACE"); !list.empty()) {
    auto selection = trace::ParseTraceList(list);
    if (!selection.ok()) return selection.status().WithContext("RANKSCOPE_TRACE");
    config.trace = *selection;
  }
  config.clock_override = text("RANKSCOPE_CLOCK");
  if (!config.clock_override.empty() && config.clock_override != "tsc" &&
      config.clock_override != "realtime") {
    return InvalidArgument(fmt::format("RANKSCOPE_CLOCK={} is not 'tsc' or 'realtime'",
                                       Printable(config.clock_override)));
  }
  std::string megabytes = text("RANKSCOPE_BUFFER_MB");
  if (!megabytes.empty()) {
    unsigned value = 0;
    auto [end, error] = std::from_chars(megabytes.data(), megabytes.data() + megabytes.size(), value);
    if (error != std::errc{} || end != megabytes.data() + megabytes.size() || value < 1 ||
        value > 65536) {
      return InvalidArgument(fmt::format("RANKSCOPE_BUFFER_MB={} is not 1 to 65536",
                                         Printable(megabytes)));
    }
    config.buffer_bytes = size_t{value} << 20;
  }
  if (std::string progress = text("RANKSCOPE_PROGRESS_FILE"); !progress.empty()) {
    if (progress != "0" && progress != "1") {
      return InvalidArgument(fmt::format("RANKSCOPE_PROGRESS_FILE={} is not 0 or 1", Printable(progress)));
    }
    config.progress_file = progress == "1";
  }
  RS_ASSIGN_OR_RETURN(config.rank, DetectRank(get_env));
  return config;
}

}  // namespace rankscope::collector
