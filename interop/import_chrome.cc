// Chrome trace JSON that ExportChromeTrace wrote (docs/chrome-export.md describes the format),
// back into rank files: every rank with its rank, world size, meta rows, lanes (ids
// included), string table (ids included) and every event of every table as it was.
//
// What an import cannot keep, because the RunSink and the writer set it for the new files:
// the run id (the import's: a run directory holds one run, and the sink names it), the
// rank of a process that had none (the sink gives it the lowest free rank, and notes it),
// the world size of a rank that recorded none (the sink sets the number of ranks imported),
// and the rows the writer owns in every file it writes: schema_version (of the new file),
// clock.end.* and closed_cleanly (written when the new file closes). Drop records (events
// lost while recording) are carried, so the new files still say their data is incomplete.
//
// The "rankscope" object is the file's structure: anything wrong in it fails the import. An
// event of traceEvents that is damaged (a field missing or of the wrong type, a pid or lane
// the object does not list, a range that never ends) is left out and counted (the policy of
// import_internal.h).
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "interop/import_internal.h"
#include "base/text.h"
#include "trace/schema.h"

namespace rankscope::interop::import {
namespace fs = std::filesystem;

namespace {

namespace od = simdjson::ondemand;

// What export_chrome.cc writes.
constexpr std::string_view kFormatName = "rankscope-chrome-trace";
constexpr int kFormatVersion = 1;

// The exporter's µs -> ns (export_chrome.cc checks that it gives back every time it writes
// without "start_ns"/"end_ns").
std::optional<int64_t> MicrosToNs(double us) {
  const double ns = std::nearbyint(us * 1000.0);
  if (!std::isfinite(ns) || ns < -9.2e18 || ns > 9.2e18) return std::nullopt;
  return static_cast<int64_t>(ns);
}

// One JSON value of a field we read, whatever its type; strings point into the parser.
struct Value {
  enum class Type : uint8_t { kNone, kInt, kUint, kDouble, kString, kBool, kNull, kArray, kObject };
  Type type = Type::kNone;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0.0;
  bool b = false;
  std::string_view s;
  std::array<uint64_t, 3> dims{};  // arrays: up to three unsigned integers
  bool dims_ok = false;            // ... and exactly three of them
};

using KeyMap = std::unordered_map<std::string_view, int>;

// Fields of one JSON object, by slot.
class Fields {
 public:
  explicit Fields(size_t slots) : values_(slots) {}
  void Reset() {
    for (Value& value : values_) value.type = Value::Type::kNone;
  }
  Value& operator[](int slot) { return values_[static_cast<size_t>(slot)]; }
  const Value& operator[](int slot) const { return values_[static_cast<size_t>(slot)]; }

 private:
  std::vector<Value> values_;
};

// ---- slots -------------------------------------------------------------------------------

enum EventSlot { kPh, kCat, kName, kPid, kTid, kTs, kDur, kId, kStartNs, kEndNs, kEventSlots };
const KeyMap& EventKeys() {
  static const KeyMap keys = {{"ph", kPh}, {"cat", kCat}, {"name", kName}, {"pid", kPid}, {"tid", kTid},
                              {"ts", kTs}, {"dur", kDur}, {"id", kId}, {"start_ns", kStartNs}, {"end_ns", kEndNs}};
  return keys;
}

enum ArgSlot {
  kCorrelation, kExternalId, kGrid, kBlock, kRegisters, kStaticShared, kDynamicShared, kBytes, kCopyKind,
  kSrcKind, kDstKind, kSrcDevice, kDstDevice, kValue, kMemoryKind, kCbid, kReturnCode, kDomain, kSyncKind,
  kContext, kStream, kCudaEvent, kCategory, kColor, kPayloadKind, kPayload, kPayloadArgs, kEndLane, kStyle,
  kCommHash, kSequence, kOp, kReduceOp, kDtype, kRoot, kPeer, kCommRank, kCommSize, kChannels, kAlgorithm,
  kProtocol, kPartKind, kChannel, kStep, kOverheadKind, kUnnamed, kArgSlots
};
const KeyMap& ArgKeys() {
  static const KeyMap keys = {
      {"correlation", kCorrelation}, {"External id", kExternalId}, {"grid", kGrid}, {"block", kBlock},
      {"registers per thread", kRegisters}, {"static shared memory", kStaticShared},
      {"dynamic shared memory", kDynamicShared}, {"bytes", kBytes}, {"copy kind", kCopyKind},
      {"src kind", kSrcKind}, {"dst kind", kDstKind}, {"src device", kSrcDevice}, {"dst device", kDstDevice},
      {"value", kValue}, {"memory kind", kMemoryKind}, {"cbid", kCbid}, {"return code", kReturnCode},
      {"domain", kDomain}, {"sync kind", kSyncKind}, {"context", kContext}, {"stream", kStream},
      {"cuda event", kCudaEvent}, {"category", kCategory}, {"color", kColor}, {"payload kind", kPayloadKind},
      {"payload", kPayload}, {"payload args", kPayloadArgs}, {"end lane", kEndLane}, {"style", kStyle},
      {"comm hash", kCommHash}, {"sequence", kSequence}, {"op", kOp}, {"reduce op", kReduceOp},
      {"dtype", kDtype}, {"root", kRoot}, {"peer", kPeer}, {"comm rank", kCommRank}, {"comm size", kCommSize},
      {"channels", kChannels}, {"algorithm", kAlgorithm}, {"protocol", kProtocol}, {"part kind", kPartKind},
      {"channel", kChannel}, {"step", kStep}, {"overhead kind", kOverheadKind}, {"unnamed", kUnnamed}};
  return keys;
}

enum LaneSlot { kLaneId, kLaneKind, kLaneRole, kLaneDevice, kLaneContext, kLaneStream, kLanePid, kLaneTid,
                kLaneCommHash, kLaneName, kLaneMaxDuration, kLaneSlots };
const KeyMap& LaneKeys() {
  static const KeyMap keys = {{"id", kLaneId}, {"kind", kLaneKind}, {"role", kLaneRole}, {"device", kLaneDevice},
                              {"context", kLaneContext}, {"stream", kLaneStream}, {"pid", kLanePid},
                              {"tid", kLaneTid}, {"comm_hash", kLaneCommHash}, {"name", kLaneName},
                              {"max_duration_ns", kLaneMaxDuration}};
  return keys;
}

enum DropSlot { kDropSource, kDropReason, kDropDevice, kDropContext, kDropStream, kDropCount, kDropSlots };
const KeyMap& DropKeys() {
  static const KeyMap keys = {{"source", kDropSource}, {"reason", kDropReason}, {"device", kDropDevice},
                              {"context", kDropContext}, {"stream", kDropStream}, {"count", kDropCount}};
  return keys;
}

// The schema's enumeration values by type and name (trace/schema.h EnumValues).
class EnumsByName {
 public:
  static const EnumsByName& Get() {
    static const EnumsByName enums;
    return enums;
  }
  std::optional<int> Find(std::string_view type, std::string_view name) const {
    auto it = values_.find(type);
    if (it == values_.end()) return std::nullopt;
    auto value = it->second.find(name);
    if (value == it->second.end()) return std::nullopt;
    return value->second;
  }

 private:
  EnumsByName() {
    for (const trace::EnumValue& e : trace::EnumValues()) values_[e.type][e.name] = e.value;
  }
  std::map<std::string_view, std::map<std::string_view, int, std::less<>>, std::less<>> values_;
};

// ---- the importer ------------------------------------------------------------------------

struct RankEntry {
  int64_t pid = 0;
  std::string file;  // the rank file it came from, for messages
  std::map<std::string, std::string> meta;
  std::vector<trace::Lane> lanes;
  std::vector<std::string_view> strings;  // ids 1, 2, ...
  std::vector<trace::DropRecord> drops;

  RankFileBuilder* builder = nullptr;
  std::string source;  // what messages call it
  // Text -> id, keys pointing into the parser's strings or into `extra`.
  std::unordered_map<std::string_view, trace::StringId> string_ids;
  std::deque<std::string> extra;
};

// A start/end range whose `b` has been read and whose `e` has not.
struct OpenRange {
  RankEntry* rank = nullptr;
  uint64_t index = 0;  // of its `b` in traceEvents
  trace::NvtxRangeEvent range;
  bool end_known = false;
};

class ChromeImporter {
 public:
  ChromeImporter(const fs::path& file, RunSink& sink)
      : file_(file), sink_(sink), event_(kEventSlots), args_(kArgSlots), lane_(kLaneSlots), drop_(kDropSlots) {}

  Status Run(const std::string& json) {
    od::document doc;
    if (auto error = parser_.iterate(json.data(), json.size(), json.capacity()).get(doc)) return JsonError(error);
    od::object top;
    if (auto error = doc.get_object().get(top)) return JsonError(error);
    od::object rankscope;
    if (auto error = top.find_field_unordered("rankscope").get_object().get(rankscope)) {
      return error == simdjson::NO_SUCH_FIELD
                 ? Bad("no \"rankscope\" object: not a Chrome trace that rankscope exported")
                 : JsonError(error, "\"rankscope\"");
    }
    RS_RETURN_IF_ERROR(ReadRankscope(rankscope));
    int64_t base = 0;
    if (auto error = top.find_field_unordered("baseTimeNanoseconds").get_int64().get(base)) {
      return error == simdjson::NO_SUCH_FIELD ? Bad("no \"baseTimeNanoseconds\"")
                                              : JsonError(error, "baseTimeNanoseconds");
    }
    base_ = base;
    RS_RETURN_IF_ERROR(CreateRanks());
    od::array events;
    if (auto error = top.find_field_unordered("traceEvents").get_array().get(events)) {
      return error == simdjson::NO_SUCH_FIELD ? Bad("no \"traceEvents\"") : JsonError(error, "traceEvents");
    }
    in_events_ = true;
    for (auto element : events) {
      od::value value;
      if (auto error = std::move(element).get(value)) return JsonError(error, Context());
      RS_RETURN_IF_ERROR(ImportEvent(value));
      ++index_;
    }
    LeaveOutUnendedRanges();
    sink_.NoteDamaged(Quoted(file_), damaged_);
    for (RankEntry& rank : ranks_) {
      rank.builder->Flush(/*force=*/true);
      for (const trace::DropRecord& drop : rank.drops) rank.builder->AddDrops(drop);
    }
    return Status::Ok();
  }

 private:
  // ---- messages ----

  Status Bad(std::string_view what) const { return Corrupt(fmt::format("{}: {}", Quoted(file_), what)); }
  Status JsonError(simdjson::error_code error, std::string_view where = {}) const {
    return Corrupt(fmt::format("{}: {}{}invalid JSON: {}", Quoted(file_), where, where.empty() ? "" : ": ",
                               simdjson::error_message(error)));
  }
  // Where the importer is, for messages: built only when one is written.
  std::string Context() const {
    if (!in_events_) return context_;
    std::string where = fmt::format("traceEvents[{}]", index_);
    const Value& ph = event_[kPh];
    const Value& name = event_[kName];
    if (ph.type == Value::Type::kString) {
      where += fmt::format(" ({} {})", Printable(ph.s, 8),
                           name.type == Value::Type::kString ? Printable(name.s, 80) : std::string("''"));
    }
    return where;
  }

  // Records the first problem with a field (`key`); readers return a harmless default after
  // one. In traceEvents the problem leaves the event out (the policy of import_internal.h);
  // in the "rankscope" object it fails the import (StructureError).
  void Fail(std::string_view key, std::string what) {
    FailBecause(fmt::format("without a valid \"{}\"", key), std::move(what));
  }
  void FailBecause(std::string reason, std::string what) {
    if (!problem_) problem_ = Problem{std::move(reason), fmt::format("{}: {}", Context(), what)};
  }
  bool failed() const { return problem_.has_value(); }
  // The problem recorded, as the error of damaged structure.
  Status StructureError() {
    if (!problem_) return Status::Ok();
    Status error = Corrupt(fmt::format("{}: {}", Quoted(file_), problem_->detail));
    problem_.reset();
    return error;
  }
  // A JSON value of the wrong type or a number out of range: the field is damaged, the JSON
  // around it is not, and the parser goes on after it.
  static bool IsValueError(simdjson::error_code error) {
    return error == simdjson::INCORRECT_TYPE || error == simdjson::NUMBER_ERROR ||
           error == simdjson::NUMBER_OUT_OF_RANGE;
  }

  // ---- JSON values ----

  static simdjson::error_code ReadValue(od::value value, Value& out) {
    od::json_type type{};
    if (auto error = value.type().get(type)) return error;
    switch (type) {
      case od::json_type::number: {
        od::number_type number{};
        if (auto error = value.get_number_type().get(number)) return error;
        if (number == od::number_type::signed_integer) {
          out.type = Value::Type::kInt;
          return value.get_int64().get(out.i);
        }
        if (number == od::number_type::unsigned_integer) {
          out.type = Value::Type::kUint;
          return value.get_uint64().get(out.u);
        }
        out.type = Value::Type::kDouble;
        return value.get_double().get(out.d);
      }
      case od::json_type::string: out.type = Value::Type::kString; return value.get_string().get(out.s);
      case od::json_type::boolean: out.type = Value::Type::kBool; return value.get_bool().get(out.b);
      case od::json_type::null: out.type = Value::Type::kNull; return simdjson::SUCCESS;
      case od::json_type::object: out.type = Value::Type::kObject; return simdjson::SUCCESS;
      case od::json_type::array: {
        out.type = Value::Type::kArray;
        od::array array;
        if (auto error = value.get_array().get(array)) return error;
        size_t count = 0;
        bool ok = true;
        for (auto element : array) {
          uint64_t n = 0;
          if (element.get_uint64().get(n) != simdjson::SUCCESS) ok = false;
          if (count < out.dims.size()) out.dims[count] = n;
          ++count;
        }
        out.dims_ok = ok && count == out.dims.size();
        return simdjson::SUCCESS;
      }
    }
    return simdjson::INCORRECT_TYPE;
  }

  // The fields of `object` that `keys` names, into `fields` (reset first).
  // `suffix` follows Context() in messages.
  Status ReadObject(od::object object, const KeyMap& keys, Fields& fields, std::string_view suffix = {}) {
    fields.Reset();
    for (auto member : object) {
      od::field field;
      std::string_view key;
      if (auto error = std::move(member).get(field)) return JsonError(error, Context() + std::string(suffix));
      if (auto error = field.unescaped_key().get(key)) return JsonError(error, Context() + std::string(suffix));
      auto slot = keys.find(key);
      if (slot == keys.end()) continue;
      if (auto error = ReadValue(field.value(), fields[slot->second])) {
        if (!IsValueError(error)) return JsonError(error, fmt::format("{}{}: \"{}\"", Context(), suffix, key));
        fields[slot->second].type = Value::Type::kNone;
        Fail(key, fmt::format("\"{}\" is not a value rankscope reads: {}", key, simdjson::error_message(error)));
      }
    }
    return Status::Ok();
  }

  bool Present(const Value& v, std::string_view key, bool required) {
    if (v.type != Value::Type::kNone && v.type != Value::Type::kNull) return true;
    if (required) Fail(key, fmt::format("no \"{}\"", key));
    return false;
  }

  template <typename T>
  T Int(const Value& v, std::string_view key, bool required = true, T fallback = T{}) {
    if (!Present(v, key, required)) return fallback;
    if (v.type == Value::Type::kInt && std::in_range<T>(v.i)) return static_cast<T>(v.i);
    if (v.type == Value::Type::kUint && std::in_range<T>(v.u)) return static_cast<T>(v.u);
    Fail(key, fmt::format("\"{}\" is not an integer in the range of its field", key));
    return fallback;
  }

  double Real(const Value& v, std::string_view key) {
    if (!Present(v, key, true)) return 0.0;
    switch (v.type) {
      case Value::Type::kInt: return static_cast<double>(v.i);
      case Value::Type::kUint: return static_cast<double>(v.u);
      case Value::Type::kDouble: return v.d;
      case Value::Type::kString:
        if (v.s == "NaN") return std::numeric_limits<double>::quiet_NaN();
        if (v.s == "Infinity") return std::numeric_limits<double>::infinity();
        if (v.s == "-Infinity") return -std::numeric_limits<double>::infinity();
        break;
      default: break;
    }
    Fail(key, fmt::format("\"{}\" is not a number", key));
    return 0.0;
  }

  std::string_view Text(const Value& v, std::string_view key, bool required = true) {
    if (!Present(v, key, required)) return {};
    if (v.type == Value::Type::kString) return v.s;
    Fail(key, fmt::format("\"{}\" is not a string", key));
    return {};
  }

  trace::Dim3 Dims(const Value& v, std::string_view key) {
    if (!Present(v, key, true)) return {};
    if (v.type == Value::Type::kArray && v.dims_ok &&
        std::all_of(v.dims.begin(), v.dims.end(), [](uint64_t n) { return n <= UINT32_MAX; })) {
      return {static_cast<uint32_t>(v.dims[0]), static_cast<uint32_t>(v.dims[1]), static_cast<uint32_t>(v.dims[2])};
    }
    Fail(key, fmt::format("\"{}\" is not three unsigned 32-bit integers", key));
    return {};
  }

  // An enumeration: its schema name, or its integer value.
  template <typename E>
  E Enum(const Value& v, std::string_view key, std::string_view type) {
    if (!Present(v, key, true)) return E{};
    if (v.type == Value::Type::kString) {
      if (std::optional<int> value = EnumsByName::Get().Find(type, v.s)) return static_cast<E>(*value);
      Fail(key, fmt::format("\"{}\" is {}, not a {} name", key, Printable(v.s), type));
      return E{};
    }
    return static_cast<E>(Int<uint8_t>(v, key));
  }

  // ---- the "rankscope" object ----

  Status ReadRankscope(od::object rankscope) {
    context_ = "\"rankscope\"";
    std::string_view format;
    if (auto error = rankscope.find_field_unordered("format").get_string().get(format)) {
      return error == simdjson::NO_SUCH_FIELD ? Bad("\"rankscope\" has no \"format\"")
                                              : JsonError(error, "rankscope.format");
    }
    if (format != kFormatName) {
      return Unsupported(fmt::format("{}: \"rankscope\" object of format {}, not {}", Quoted(file_), Printable(format),
                                     kFormatName));
    }
    int64_t version = 0;
    if (auto error = rankscope.find_field_unordered("version").get_int64().get(version)) {
      return error == simdjson::NO_SUCH_FIELD ? Bad("\"rankscope\" has no \"version\"")
                                              : JsonError(error, "rankscope.version");
    }
    if (version < 1 || version > kFormatVersion) {
      return Unsupported(fmt::format("{}: {} version {}; this build reads up to version {} (a newer rankscope wrote "
                                     "it?)",
                                     Quoted(file_), kFormatName, version, kFormatVersion));
    }
    od::array ranks;
    if (auto error = rankscope.find_field_unordered("ranks").get_array().get(ranks)) {
      return error == simdjson::NO_SUCH_FIELD ? Bad("\"rankscope\" has no \"ranks\"")
                                              : JsonError(error, "rankscope.ranks");
    }
    for (auto element : ranks) {
      context_ = fmt::format("rankscope.ranks[{}]", ranks_.size());
      od::object rank;
      if (auto error = element.get_object().get(rank)) return JsonError(error, context_);
      RS_RETURN_IF_ERROR(ReadRank(rank));
    }
    return Status::Ok();
  }

  Status ReadRank(od::object object) {
    RankEntry rank;
    bool has_pid = false, has_meta = false, has_lanes = false, has_strings = false;
    const std::string where = context_;
    for (auto member : object) {
      od::field field;
      std::string_view key;
      if (auto error = std::move(member).get(field)) return JsonError(error, where);
      if (auto error = field.unescaped_key().get(key)) return JsonError(error, where);
      od::value value = field.value();
      if (key == "pid") {
        if (auto error = value.get_int64().get(rank.pid)) return JsonError(error, where + ".pid");
        has_pid = true;
      } else if (key == "file") {
        std::string_view name;
        if (auto error = value.get_string().get(name)) return JsonError(error, where + ".file");
        rank.file = std::string(name);
      } else if (key == "meta") {
        od::object meta;
        if (auto error = value.get_object().get(meta)) return JsonError(error, where + ".meta");
        for (auto row : meta) {
          od::field entry;
          std::string_view name, text;
          if (auto error = std::move(row).get(entry)) return JsonError(error, where + ".meta");
          if (auto error = entry.unescaped_key().get(name)) return JsonError(error, where + ".meta");
          if (auto error = entry.value().get_string().get(text)) {
            return JsonError(error, fmt::format("{}.meta.{}", where, Printable(name)));
          }
          rank.meta[std::string(name)] = std::string(text);
        }
        has_meta = true;
      } else if (key == "lanes") {
        od::array lanes;
        if (auto error = value.get_array().get(lanes)) return JsonError(error, where + ".lanes");
        for (auto element : lanes) {
          context_ = fmt::format("{}.lanes[{}]", where, rank.lanes.size());
          od::object lane;
          if (auto error = element.get_object().get(lane)) return JsonError(error, context_);
          RS_RETURN_IF_ERROR(ReadObject(lane, LaneKeys(), lane_));
          rank.lanes.push_back(LaneFrom(lane_));
          RS_RETURN_IF_ERROR(StructureError());
          if (rank.lanes.back().id != rank.lanes.size()) {
            return Bad(fmt::format("{}: lane ids must run 1, 2, ... in order", context_));
          }
        }
        has_lanes = true;
      } else if (key == "strings") {
        od::array strings;
        if (auto error = value.get_array().get(strings)) return JsonError(error, where + ".strings");
        for (auto element : strings) {
          std::string_view text;
          if (auto error = element.get_string().get(text)) {
            return JsonError(error, fmt::format("{}.strings[{}]", where, rank.strings.size()));
          }
          rank.strings.push_back(text);
        }
        has_strings = true;
      } else if (key == "drops") {
        od::array drops;
        if (auto error = value.get_array().get(drops)) return JsonError(error, where + ".drops");
        for (auto element : drops) {
          context_ = where + ".drops";
          od::object drop;
          if (auto error = element.get_object().get(drop)) return JsonError(error, context_);
          RS_RETURN_IF_ERROR(ReadObject(drop, DropKeys(), drop_));
          trace::DropRecord record;
          record.source = std::string(Text(drop_[kDropSource], "source"));
          record.reason = std::string(Text(drop_[kDropReason], "reason"));
          record.device = Int<int32_t>(drop_[kDropDevice], "device");
          record.context = Int<uint32_t>(drop_[kDropContext], "context");
          record.stream = Int<uint64_t>(drop_[kDropStream], "stream");
          record.count = Int<uint64_t>(drop_[kDropCount], "count");
          RS_RETURN_IF_ERROR(StructureError());
          rank.drops.push_back(std::move(record));
        }
      }
    }
    const std::pair<bool, const char*> required[] = {
        {has_pid, "pid"}, {has_meta, "meta"}, {has_lanes, "lanes"}, {has_strings, "strings"}};
    for (const auto& [present, name] : required) {
      if (!present) return Bad(fmt::format("{} has no \"{}\"", where, name));
    }
    if (pids_.contains(rank.pid)) return Bad(fmt::format("{}: pid {} appears twice", where, rank.pid));
    pids_.emplace(rank.pid, ranks_.size());
    ranks_.push_back(std::move(rank));
    return Status::Ok();
  }

  trace::Lane LaneFrom(const Fields& f) {
    trace::Lane lane;
    lane.id = Int<trace::LaneId>(f[kLaneId], "id");
    lane.kind = Enum<trace::LaneKind>(f[kLaneKind], "kind", "lane_kind");
    lane.role = Enum<trace::LaneRole>(f[kLaneRole], "role", "lane_role");
    lane.device = Int<int32_t>(f[kLaneDevice], "device");
    lane.context = Int<uint32_t>(f[kLaneContext], "context");
    lane.stream = Int<uint64_t>(f[kLaneStream], "stream");
    lane.pid = Int<int64_t>(f[kLanePid], "pid");
    lane.tid = Int<int64_t>(f[kLaneTid], "tid");
    lane.comm_hash = Int<uint64_t>(f[kLaneCommHash], "comm_hash");
    lane.name = std::string(Text(f[kLaneName], "name"));
    lane.max_duration_ns = Int<int64_t>(f[kLaneMaxDuration], "max_duration_ns");
    return lane;
  }

  // Meta rows the new file gets from elsewhere: the identity (run id and rank as the sink
  // sets them), and what the writer itself records about the file it writes.
  static bool WrittenByImport(const std::string& key) {
    static const std::set<std::string, std::less<>> keys = {
        std::string(trace::meta_key::kRunId),       std::string(trace::meta_key::kRank),
        std::string(trace::meta_key::kWorldSize),   std::string(trace::meta_key::kLocalRank),
        std::string(trace::meta_key::kHost),        std::string(trace::meta_key::kPid),
        std::string(trace::meta_key::kCommandLine), std::string(trace::meta_key::kBackend),
        std::string(trace::meta_key::kSchemaVersion), std::string(trace::meta_key::kClosedCleanly)};
    return keys.contains(key) || key.starts_with(fmt::format("{}end.", trace::meta_key::kClockPrefix));
  }

  // Rank files for every rank: those with a rank first, so that the sink gives the ranks
  // that are free, not theirs, to processes without one.
  Status CreateRanks() {
    std::vector<RankEntry*> order;
    for (RankEntry& rank : ranks_) order.push_back(&rank);
    auto has_rank = [](const RankEntry* rank) {
      auto it = rank->meta.find(std::string(trace::meta_key::kRank));
      return it != rank->meta.end() && it->second != "unknown" && !it->second.empty();
    };
    std::stable_partition(order.begin(), order.end(), has_rank);
    for (RankEntry* rank : order) {
      const std::string label = rank->file.empty() ? fmt::format("pid {}", rank->pid) : rank->file;
      rank->source = fmt::format("{} ({})", Quoted(file_), label);
      Result<trace::RankMeta> meta = trace::MetaFromRows(rank->meta);
      if (!meta.ok()) return Corrupt(fmt::format("{}: meta: {}", rank->source, meta.status().message()));
      const trace::RankIdentity& who = *meta;
      RS_ASSIGN_OR_RETURN(rank->builder, sink_.Rank(who, rank->source));
      for (const auto& [key, value] : rank->meta) {
        if (!WrittenByImport(key)) rank->builder->SetMeta(key, value);
      }
      for (const trace::Lane& lane : rank->lanes) {
        const trace::LaneId id = rank->builder->Lane(lane);
        if (id != lane.id) {
          return Corrupt(fmt::format("{}: lane {} is the same lane as lane {}", rank->source, lane.id, id));
        }
      }
      // The string table first, in id order: every event then gets the ids it had.
      for (std::string_view text : rank->strings) {
        if (!text.empty()) rank->string_ids.emplace(text, rank->builder->Intern(text));
      }
    }
    sink_.DoneClaiming();  // inputs read beside this one may claim theirs now
    return Status::Ok();
  }

  trace::StringId Intern(RankEntry& rank, std::string_view text) {
    if (text.empty()) return trace::kEmptyString;
    auto it = rank.string_ids.find(text);
    if (it != rank.string_ids.end()) return it->second;
    // Text the string table did not hold: kept here, as the key must outlive the event.
    const std::string_view key = rank.extra.emplace_back(text);
    const trace::StringId id = rank.builder->Intern(key);
    rank.string_ids.emplace(key, id);
    return id;
  }

  // ---- events ----

  // The categories of complete events the exporter writes.
  static bool ExportedCategory(std::string_view cat) {
    static constexpr std::string_view kCategories[] = {
        "kernel",    "gpu_memcpy",      "gpu_memset", "cuda_runtime", "cuda_driver", "cuda_api",
        "cuda_sync", "user_annotation", "collective", "collective_part", "overhead"};
    return std::find(std::begin(kCategories), std::end(kCategories), cat) != std::end(kCategories);
  }

  // What a damaged event is counted as: its category for complete events, else its phase's
  // kind of event.
  std::string_view DamagedKind() const {
    const Value& ph = event_[kPh];
    const Value& cat = event_[kCat];
    if (ph.type != Value::Type::kString) return "";
    if (ph.s == "X") return cat.type == Value::Type::kString && ExportedCategory(cat.s) ? cat.s : std::string_view();
    if (ph.s == "b" || ph.s == "e") return "start/end range";
    if (ph.s == "i") return "instant";
    if (ph.s == "C") return "counter";
    return "";
  }

  // One element of traceEvents. JSON that is not JSON fails the import; an event that is
  // damaged is left out and counted, on its rank when it names one.
  Status ImportEvent(od::value element) {
    event_.Reset();
    args_.Reset();
    event_rank_ = nullptr;
    od::object object;
    if (auto error = element.get_object().get(object)) {
      if (error != simdjson::INCORRECT_TYPE) return JsonError(error, Context());
      damaged_.Count("", "not a JSON object", fmt::format("traceEvents[{}] is not an object", index_));
      return Status::Ok();
    }
    for (auto member : object) {
      od::field field;
      std::string_view key;
      if (auto error = std::move(member).get(field)) return JsonError(error, Context());
      if (auto error = field.unescaped_key().get(key)) return JsonError(error, Context());
      if (key == "args") {
        od::object args;
        if (auto error = field.value().get_object().get(args)) {
          if (error != simdjson::INCORRECT_TYPE) return JsonError(error, Context() + ": \"args\"");
          FailBecause("with args that are not an object", "\"args\" is not an object");
          continue;
        }
        RS_RETURN_IF_ERROR(ReadObject(args, ArgKeys(), args_, ": \"args\""));
        continue;
      }
      auto slot = EventKeys().find(key);
      if (slot == EventKeys().end()) continue;
      if (auto error = ReadValue(field.value(), event_[slot->second])) {
        if (!IsValueError(error)) return JsonError(error, fmt::format("{}: \"{}\"", Context(), key));
        event_[slot->second].type = Value::Type::kNone;
        Fail(key, fmt::format("\"{}\" is not a value rankscope reads: {}", key, simdjson::error_message(error)));
      }
    }
    if (!failed()) ConvertEvent();
    if (problem_) {
      DamagedEvents& damaged = event_rank_ != nullptr ? event_rank_->builder->damaged() : damaged_;
      damaged.Count(DamagedKind(), problem_->reason, problem_->detail);
      problem_.reset();
    }
    return Status::Ok();
  }

  // The event read into event_ and args_, added to its rank; on a problem, nothing is added.
  void ConvertEvent() {
    const std::string_view ph = Text(event_[kPh], "ph");
    if (failed() || ph == "M" || ph == "s" || ph == "f") return;  // names and flows: from lanes and ids
    RankEntry* rank = RankOf();
    if (rank == nullptr) return;
    event_rank_ = rank;
    if (ph == "X") {
      Complete(*rank);
    } else if (ph == "b") {
      BeginRange(*rank);
    } else if (ph == "e") {
      EndRange();
    } else if (ph == "i") {
      trace::NvtxMarkEvent mark;
      Common(*rank, mark, kExternalId);
      if (!failed()) {
        const bool has_end = event_[kEndNs].type != Value::Type::kNone;
        mark.end_ns = has_end ? Int<int64_t>(event_[kEndNs], "end_ns") : mark.start_ns;
      }
      EndsAfterStart(mark, "end_ns");
      Nvtx(*rank, mark);
      if (failed()) return;
      rank->builder->events().nvtx_marks.push_back(mark);
    } else if (ph == "C") {
      trace::CounterSample sample;
      sample.lane = LaneOf(*rank);
      sample.ts_ns = Start();
      sample.value = Real(args_[kValue], "value");
      if (failed()) return;
      rank->builder->events().counter_samples.push_back(sample);
    } else {
      FailBecause("of a phase rankscope does not export", fmt::format("phase {}", Printable(ph, 8)));
      return;
    }
    rank->builder->Flush();
  }

  // The rank whose process the event names; nullptr after a problem.
  RankEntry* RankOf() {
    const int64_t pid = Int<int64_t>(event_[kPid], "pid");
    if (failed()) return nullptr;
    auto it = pids_.find(pid);
    if (it == pids_.end()) {
      FailBecause("of a pid the \"rankscope\" object does not list",
                  fmt::format("pid {} is not a process of the \"rankscope\" object", pid));
      return nullptr;
    }
    return &ranks_[it->second];
  }

  trace::LaneId LaneOf(const RankEntry& rank) {
    const auto tid = Int<trace::LaneId>(event_[kTid], "tid");
    if (!failed() && (tid == trace::kNoLane || tid > rank.lanes.size())) {
      Fail("tid", fmt::format("tid {} is not a lane of its rank", tid));
    }
    return tid;
  }

  // ns from a `ts`-like value relative to the base time.
  int64_t Absolute(const Value& v, std::string_view key) {
    const double us = Real(v, key);
    if (failed()) return 0;
    int64_t t = 0;
    const std::optional<int64_t> offset = MicrosToNs(us);
    if (!offset || __builtin_add_overflow(base_, *offset, &t)) Fail(key, fmt::format("\"{}\" is out of range", key));
    return t;
  }

  int64_t Start() {
    if (event_[kStartNs].type != Value::Type::kNone) return Int<int64_t>(event_[kStartNs], "start_ns");
    return Absolute(event_[kTs], "ts");
  }

  int64_t End(int64_t start) {
    if (event_[kEndNs].type != Value::Type::kNone) return Int<int64_t>(event_[kEndNs], "end_ns");
    const double us = Real(event_[kDur], "dur");
    if (failed()) return 0;
    int64_t end = 0;
    const std::optional<int64_t> duration = MicrosToNs(us);
    if (!duration || __builtin_add_overflow(start, *duration, &end)) Fail("dur", "\"dur\" is out of range");
    return end;
  }

  // The writer refuses an event that ends before it starts.
  void EndsAfterStart(const trace::EventCommon& e, std::string_view key) {
    if (!failed() && e.end_ns < e.start_ns) Fail(key, fmt::format("it ends before it starts (\"{}\")", key));
  }

  std::string_view StoredName() {
    const bool unnamed = args_[kUnnamed].type == Value::Type::kBool && args_[kUnnamed].b;
    const std::string_view name = Text(event_[kName], "name");
    return unnamed ? std::string_view() : name;
  }

  // Lane, name, start and correlation id (from arg `correlation`); the end is the caller's.
  void Common(RankEntry& rank, trace::EventCommon& e, ArgSlot correlation = kCorrelation) {
    e.lane = LaneOf(rank);
    e.name = Intern(rank, StoredName());
    e.start_ns = Start();
    e.correlation_id = Int<uint64_t>(args_[correlation], correlation == kCorrelation ? "correlation" : "External id");
  }

  void Interval(RankEntry& rank, trace::EventCommon& e, ArgSlot correlation = kCorrelation) {
    Common(rank, e, correlation);
    if (failed()) return;
    e.end_ns = End(e.start_ns);
    EndsAfterStart(e, event_[kEndNs].type != Value::Type::kNone ? "end_ns" : "dur");
  }

  void Nvtx(RankEntry& rank, trace::NvtxAttributes& a) {
    a.domain = Intern(rank, Text(args_[kDomain], "domain"));
    a.category = Int<uint32_t>(args_[kCategory], "category");
    a.color = Int<uint32_t>(args_[kColor], "color");
    a.payload.kind = Enum<trace::PayloadKind>(args_[kPayloadKind], "payload kind", "payload_kind");
    if (failed()) return;
    switch (a.payload.kind) {
      case trace::PayloadKind::kUint64:
      case trace::PayloadKind::kUint32:
        a.payload.int_value = static_cast<int64_t>(Int<uint64_t>(args_[kPayload], "payload"));
        break;
      case trace::PayloadKind::kInt64:
      case trace::PayloadKind::kInt32: a.payload.int_value = Int<int64_t>(args_[kPayload], "payload"); break;
      case trace::PayloadKind::kDouble:
      case trace::PayloadKind::kFloat: a.payload.real_value = Real(args_[kPayload], "payload"); break;
      case trace::PayloadKind::kNone: break;
    }
    a.args = Intern(rank, Text(args_[kPayloadArgs], "payload args"));
  }

  void Complete(RankEntry& rank) {
    const std::string_view cat = Text(event_[kCat], "cat");
    if (failed()) return;
    trace::EventTables& out = rank.builder->events();
    if (cat == "kernel") {
      trace::KernelEvent k;
      Interval(rank, k);
      k.grid = Dims(args_[kGrid], "grid");
      k.block = Dims(args_[kBlock], "block");
      k.registers_per_thread = Int<uint32_t>(args_[kRegisters], "registers per thread");
      k.static_shared_bytes = Int<uint32_t>(args_[kStaticShared], "static shared memory");
      k.dynamic_shared_bytes = Int<uint32_t>(args_[kDynamicShared], "dynamic shared memory");
      if (!failed()) out.kernels.push_back(k);
    } else if (cat == "gpu_memcpy") {
      trace::MemcpyEvent c;
      Interval(rank, c);
      c.bytes = Int<uint64_t>(args_[kBytes], "bytes");
      c.copy_kind = Enum<trace::CopyKind>(args_[kCopyKind], "copy kind", "copy_kind");
      c.src_kind = Enum<trace::MemoryKind>(args_[kSrcKind], "src kind", "memory_kind");
      c.dst_kind = Enum<trace::MemoryKind>(args_[kDstKind], "dst kind", "memory_kind");
      c.src_device = Int<int32_t>(args_[kSrcDevice], "src device");
      c.dst_device = Int<int32_t>(args_[kDstDevice], "dst device");
      if (!failed()) out.memcpys.push_back(c);
    } else if (cat == "gpu_memset") {
      trace::MemsetEvent s;
      Interval(rank, s);
      s.bytes = Int<uint64_t>(args_[kBytes], "bytes");
      s.value = Int<uint32_t>(args_[kValue], "value");
      s.memory_kind = Enum<trace::MemoryKind>(args_[kMemoryKind], "memory kind", "memory_kind");
      if (!failed()) out.memsets.push_back(s);
    } else if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "cuda_api") {
      trace::ApiCallEvent a;
      Interval(rank, a);
      a.domain = Enum<trace::ApiDomain>(args_[kDomain], "domain", "api_domain");
      a.callback_id = Int<uint32_t>(args_[kCbid], "cbid");
      a.return_code = Int<int32_t>(args_[kReturnCode], "return code");
      a.external_id = Int<uint64_t>(args_[kExternalId], "External id");
      if (!failed()) out.api_calls.push_back(a);
    } else if (cat == "cuda_sync") {
      trace::SyncEvent y;
      Interval(rank, y);
      y.sync_kind = Enum<trace::SyncKind>(args_[kSyncKind], "sync kind", "sync_kind");
      y.context = Int<uint32_t>(args_[kContext], "context");
      y.stream = Int<uint64_t>(args_[kStream], "stream");
      y.cuda_event_id = Int<uint64_t>(args_[kCudaEvent], "cuda event");
      if (!failed()) out.syncs.push_back(y);
    } else if (cat == "user_annotation") {
      trace::NvtxRangeEvent r;
      Interval(rank, r, kExternalId);
      Nvtx(rank, r);
      r.style = trace::NvtxRangeStyle::kPushPop;
      r.end_lane = EndLane(rank);
      if (!failed()) out.nvtx_ranges.push_back(r);
    } else if (cat == "collective") {
      trace::CollectiveEvent c;
      Interval(rank, c);
      c.comm_hash = Int<uint64_t>(args_[kCommHash], "comm hash");
      c.sequence = Int<uint64_t>(args_[kSequence], "sequence");
      c.op = Enum<trace::CollectiveOp>(args_[kOp], "op", "collective_op");
      c.reduce_op = Enum<trace::ReduceOp>(args_[kReduceOp], "reduce op", "reduce_op");
      c.datatype = Enum<trace::DataType>(args_[kDtype], "dtype", "datatype");
      c.bytes = Int<uint64_t>(args_[kBytes], "bytes");
      c.root = Int<int32_t>(args_[kRoot], "root");
      c.peer = Int<int32_t>(args_[kPeer], "peer");
      c.comm_rank = Int<int32_t>(args_[kCommRank], "comm rank");
      c.comm_size = Int<int32_t>(args_[kCommSize], "comm size");
      c.channels = Int<uint32_t>(args_[kChannels], "channels");
      c.algorithm = Intern(rank, Text(args_[kAlgorithm], "algorithm"));
      c.protocol = Intern(rank, Text(args_[kProtocol], "protocol"));
      if (!failed()) out.collectives.push_back(c);
    } else if (cat == "collective_part") {
      trace::CollectivePartEvent p;
      Interval(rank, p);
      p.comm_hash = Int<uint64_t>(args_[kCommHash], "comm hash");
      p.sequence = Int<uint64_t>(args_[kSequence], "sequence");
      p.part_kind = Enum<trace::CollectivePartKind>(args_[kPartKind], "part kind", "collective_part_kind");
      p.channel = Int<int32_t>(args_[kChannel], "channel");
      p.peer = Int<int32_t>(args_[kPeer], "peer");
      p.step = Int<int32_t>(args_[kStep], "step");
      p.bytes = Int<uint64_t>(args_[kBytes], "bytes");
      if (!failed()) out.collective_parts.push_back(p);
    } else if (cat == "overhead") {
      trace::OverheadEvent o;
      Interval(rank, o);
      o.overhead_kind = Enum<trace::OverheadKind>(args_[kOverheadKind], "overhead kind", "overhead_kind");
      if (!failed()) out.overheads.push_back(o);
    } else {
      FailBecause("of a category rankscope does not export", fmt::format("category {}", Printable(cat)));
    }
  }

  trace::LaneId EndLane(const RankEntry& rank) {
    const auto lane = Int<trace::LaneId>(args_[kEndLane], "end lane", /*required=*/false, trace::kNoLane);
    if (!failed() && lane > rank.lanes.size()) {
      Fail("end lane", fmt::format("\"end lane\" {} is not a lane of its rank", lane));
    }
    return lane;
  }

  // A start/end range's `b`: the range, waiting for its `e`.
  void BeginRange(RankEntry& rank) {
    OpenRange open;
    open.rank = &rank;
    open.index = index_;
    trace::NvtxRangeEvent& r = open.range;
    Common(rank, r, kExternalId);
    Nvtx(rank, r);
    r.style = args_[kStyle].type == Value::Type::kNone
                  ? trace::NvtxRangeStyle::kStartEnd
                  : static_cast<trace::NvtxRangeStyle>(Int<uint8_t>(args_[kStyle], "style"));
    r.end_lane = EndLane(rank);
    if (!failed() && event_[kEndNs].type != Value::Type::kNone) {
      r.end_ns = Int<int64_t>(event_[kEndNs], "end_ns");
      EndsAfterStart(r, "end_ns");
      open.end_known = true;
    }
    const uint64_t id = Int<uint64_t>(event_[kId], "id");
    if (failed()) return;
    if (!open_ranges_.emplace(id, open).second) {
      FailBecause("beginning an id already begun", fmt::format("id {} begins twice", id));
    }
  }

  void EndRange() {
    const uint64_t id = Int<uint64_t>(event_[kId], "id");
    if (failed()) return;
    auto it = open_ranges_.find(id);
    if (it == open_ranges_.end()) {
      FailBecause("ending an id that never began", fmt::format("id {} ends without a begin", id));
      return;
    }
    OpenRange open = it->second;
    open_ranges_.erase(it);
    // The range is its begin's: counted there, not on the `e`'s pid, when it is damaged.
    event_rank_ = open.rank;
    if (!open.end_known) {
      open.range.end_ns = Absolute(event_[kTs], "ts");
      EndsAfterStart(open.range, "ts");
    }
    if (failed()) return;
    open.rank->builder->events().nvtx_ranges.push_back(open.range);
    open.rank->builder->Flush();
  }

  // Ranges whose `b` was read and whose `e` never came, in the order they began.
  void LeaveOutUnendedRanges() {
    std::vector<std::pair<uint64_t, const OpenRange*>> unended;
    for (const auto& [id, open] : open_ranges_) unended.emplace_back(id, &open);
    std::sort(unended.begin(), unended.end(),
              [](const auto& a, const auto& b) { return a.second->index < b.second->index; });
    for (const auto& [id, open] : unended) {
      const std::string detail = fmt::format("traceEvents[{}]: id {} begins and never ends", open->index, id);
      open->rank->builder->damaged().Count("start/end range", "that never ended (no \"e\")", detail);
    }
    open_ranges_.clear();
  }

  const fs::path& file_;
  RunSink& sink_;
  od::parser parser_;
  int64_t base_ = 0;
  std::vector<RankEntry> ranks_;
  std::unordered_map<int64_t, size_t> pids_;  // Chrome pid -> index in ranks_
  std::unordered_map<uint64_t, OpenRange> open_ranges_;
  Fields event_, args_, lane_, drop_;
  uint64_t index_ = 0;  // of the event in traceEvents
  std::string context_;     // in the "rankscope" object
  bool in_events_ = false;  // in traceEvents: Context() says which event
  // The first problem with the object being read, and why it is a problem.
  struct Problem {
    std::string reason;
    std::string detail;
  };
  std::optional<Problem> problem_;
  RankEntry* event_rank_ = nullptr;  // the rank of the event being read, once known
  DamagedEvents damaged_;            // events of no rank: their pid is unknown
};

}  // namespace

Status ImportRankscopeChrome(const fs::path& file, const std::string& json, RunSink& sink) {
  ChromeImporter importer(file, sink);
  return importer.Run(json);
}

}  // namespace rankscope::interop::import
