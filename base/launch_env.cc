#include "base/launch_env.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "base/text.h"

namespace rankscope {
namespace {

struct Family {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr when the launcher has none
  const char* local_size;  // likewise
};

constexpr Family kFamilies[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", nullptr, nullptr},
};

Result<std::optional<int>> ParseBounded(const GetEnv& get_env, const char* name, int min) {
  const char* text = name != nullptr ? get_env(name) : nullptr;
  if (text == nullptr || *text == '\0') return std::optional<int>{};
  std::string_view view(text);
  int value = 0;
  auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (error != std::errc{} || end != view.data() + view.size() || value < min ||
      value >= kMaxWorldSize + (min > 0 ? 1 : 0)) {
    return InvalidArgument(fmt::format("{}={} is not a valid {}", name, Printable(view),
                                       min > 0 ? "size" : "rank"));
  }
  return std::optional<int>(value);
}

}  // namespace

GetEnv ProcessEnv() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

Result<RankEnv> DetectRank(const GetEnv& get_env) {
  for (const Family& family : kFamilies) {
    RS_ASSIGN_OR_RETURN(std::optional<int> rank, ParseBounded(get_env, family.rank, 0));
    if (!rank) continue;
    RankEnv found;
    found.source = family.source;
    found.rank = rank;
    RS_ASSIGN_OR_RETURN(found.world_size, ParseBounded(get_env, family.size, 1));
    RS_ASSIGN_OR_RETURN(found.local_rank, ParseBounded(get_env, family.local_rank, 0));
    // Slurm writes SLURM_NTASKS_PER_NODE only when --ntasks-per-node was given; an odd
    // value there is not worth refusing a rank over.
    auto local_size = ParseBounded(get_env, family.local_size, 1);
    if (local_size.ok()) found.local_world_size = *local_size;
    if (found.world_size && *found.rank >= *found.world_size) {
      return InvalidArgument(fmt::format("{}={} is not below {}={}", family.rank, *found.rank,
                                         family.size, *found.world_size));
    }
    return found;
  }
  return RankEnv{};
}

}  // namespace rankscope
