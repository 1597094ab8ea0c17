#include "trace/rank_meta.h"

#include <fmt/format.h>

#include <charconv>

#include "base/text.h"
#include "trace/schema.h"

namespace rankscope::trace {
namespace {

template <typename T>
std::optional<T> ParseNumber(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

const std::string* Find(const std::map<std::string, std::string>& rows, std::string_view key) {
  auto it = rows.find(std::string(key));
  return it == rows.end() ? nullptr : &it->second;
}

// Reads an optional integer key; a present but malformed value is an error.
template <typename T>
Status ReadOptional(const std::map<std::string, std::string>& rows, std::string_view key,
                    std::optional<T>* out) {
  const std::string* text = Find(rows, key);
  if (text == nullptr || text->empty() || *text == "unknown") return Status::Ok();
  *out = ParseNumber<T>(*text);
  if (!*out) return Corrupt(fmt::format("meta key '{}' is not a number: {}", key, Printable(*text)));
  return Status::Ok();
}

std::optional<ClockSample> ReadClock(const std::map<std::string, std::string>& rows,
                                     const char* which) {
  const std::string prefix = fmt::format("{}{}.", meta_key::kClockPrefix, which);
  const std::string* realtime = Find(rows, prefix + "realtime_ns");
  const std::string* monotonic = Find(rows, prefix + "monotonic_ns");
  const std::string* tsc = Find(rows, prefix + "tsc");
  if (!realtime || !monotonic || !tsc) return std::nullopt;
  auto r = ParseNumber<int64_t>(*realtime);
  auto m = ParseNumber<int64_t>(*monotonic);
  auto t = ParseNumber<uint64_t>(*tsc);
  if (!r || !m || !t) return std::nullopt;
  return ClockSample{*r, *m, *t};
}

}  // namespace

std::map<std::string, std::string> IdentityToMeta(const RankIdentity& id) {
  auto optional = [](const std::optional<int>& v) {
    return v ? std::to_string(*v) : std::string("unknown");
  };
  return {
      {std::string(meta_key::kRunId), id.run_id},
      {std::string(meta_key::kRank), optional(id.rank)},
      {std::string(meta_key::kWorldSize), optional(id.world_size)},
      {std::string(meta_key::kLocalRank), optional(id.local_rank)},
      {std::string(meta_key::kHost), id.host},
      {std::string(meta_key::kPid), std::to_string(id.pid)},
      {std::string(meta_key::kCommandLine), id.command_line},
      {std::string(meta_key::kBackend), id.backend},
  };
}

std::map<std::string, std::string> ClockToMeta(const char* which, const ClockSample& sample) {
  const std::string prefix = fmt::format("{}{}.", meta_key::kClockPrefix, which);
  return {
      {prefix + "realtime_ns", std::to_string(sample.realtime_ns)},
      {prefix + "monotonic_ns", std::to_string(sample.monotonic_ns)},
      {prefix + "tsc", std::to_string(sample.tsc)},
  };
}

Result<RankMeta> MetaFromRows(std::map<std::string, std::string> rows) {
  RankMeta meta;
  const std::string* run_id = Find(rows, meta_key::kRunId);
  if (run_id == nullptr || run_id->empty()) return Corrupt("meta table has no run_id");
  meta.run_id = *run_id;
  RS_RETURN_IF_ERROR(ReadOptional(rows, meta_key::kRank, &meta.rank));
  RS_RETURN_IF_ERROR(ReadOptional(rows, meta_key::kWorldSize, &meta.world_size));
  RS_RETURN_IF_ERROR(ReadOptional(rows, meta_key::kLocalRank, &meta.local_rank));
  if (meta.rank && (*meta.rank < 0 || *meta.rank >= kMaxWorldSize)) {
    return Corrupt(fmt::format("meta rank {} is out of range (0 to {})", *meta.rank, kMaxWorldSize - 1));
  }
  if (meta.world_size && (*meta.world_size <= 0 || *meta.world_size > kMaxWorldSize)) {
    return Corrupt(fmt::format("meta world_size {} is out of range (1 to {})", *meta.world_size, kMaxWorldSize));
  }
  std::optional<int64_t> pid;
  RS_RETURN_IF_ERROR(ReadOptional(rows, meta_key::kPid, &pid));
  meta.pid = pid.value_or(0);
  std::optional<int> schema_version;
  RS_RETURN_IF_ERROR(ReadOptional(rows, meta_key::kSchemaVersion, &schema_version));
  meta.schema_version = schema_version.value_or(0);
  if (const std::string* v = Find(rows, meta_key::kHost)) meta.host = *v;
  if (const std::string* v = Find(rows, meta_key::kCommandLine)) meta.command_line = *v;
  if (const std::string* v = Find(rows, meta_key::kBackend)) meta.backend = *v;
  if (const std::string* v = Find(rows, meta_key::kToolVersion)) meta.tool_version = *v;
  if (const std::string* v = Find(rows, meta_key::kClosedCleanly)) meta.closed_cleanly = *v == "1";
  meta.clock_start = ReadClock(rows, "start");
  meta.clock_end = ReadClock(rows, "end");
  meta.entries = std::move(rows);
  return meta;
}

}  // namespace rankscope::trace
