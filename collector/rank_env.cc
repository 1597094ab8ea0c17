#include "collector/rank_env.h"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "base/text.h"
#include "trace/rank_meta.h"
#include "trace/run_dir.h"

namespace rankscope::collector {
namespace {

struct Family {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr when the launcher has none
};

constexpr Family kFamilies[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"pmi", "PMI_RANK", "PMI_SIZE", nullptr},
};

Result<std::optional<int>> ParseBounded(const GetEnv& get_env, const char* name, int min) {
  const char* text = name != nullptr ? get_env(name) : nullptr;
  if (text == nullptr || *text == '\0') return std::optional<int>{};
  std::string_view view(text);
  int value = 0;
  auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (error != std::errc{} || end != view.data() + view.size() || value < min ||
      value >= trace::kMaxWorldSize + (min > 0 ? 1 : 0)) {
    return InvalidArgument(fmt::format("{}='{}' is not a valid {}", name, Printable(view),
                                       min > 0 ? "size" : "rank"));
  }
  return std::optional<int>(value);
}

}  // namespace

Result<RankEnv> DetectRank(const GetEnv& get_env) {
  for (const Family& family : kFamilies) {
    RS_ASSIGN_OR_RETURN(std::optional<int> rank, ParseBounded(get_env, family.rank, 0));
    if (!rank) continue;
    RankEnv found;
    found.source = family.source;
    found.rank = rank;
    RS_ASSIGN_OR_RETURN(found.world_size, ParseBounded(get_env, family.size, 1));
    RS_ASSIGN_OR_RETURN(found.local_rank, ParseBounded(get_env, family.local_rank, 0));
    if (found.world_size && *found.rank >= *found.world_size) {
      return InvalidArgument(fmt::format("{}={} is not below {}={}", family.rank, *found.rank,
                                         family.size, *found.world_size));
    }
    return found;
  }
  return RankEnv{};
}

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
    return InvalidArgument(fmt::format("RANKSCOPE_RUN_ID='{}' is not a valid run id",
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
    return InvalidArgument(fmt::format("RANKSCOPE_CLOCK='{}' is not 'tsc' or 'realtime'",
                                       Printable(config.clock_override)));
  }
  std::string megabytes = text("RANKSCOPE_BUFFER_MB");
  if (!megabytes.empty()) {
    unsigned value = 0;
    auto [end, error] = std::from_chars(megabytes.data(), megabytes.data() + megabytes.size(), value);
    if (error != std::errc{} || end != megabytes.data() + megabytes.size() || value < 1 ||
        value > 65536) {
      return InvalidArgument(fmt::format("RANKSCOPE_BUFFER_MB='{}' is not 1 to 65536",
                                         Printable(megabytes)));
    }
    config.buffer_bytes = size_t{value} << 20;
  }
  RS_ASSIGN_OR_RETURN(config.rank, DetectRank(get_env));
  return config;
}

}  // namespace rankscope::collector
