// The Report as JSON (docs/report-json.md). Keys are the struct field names, in the structs'
// order; an empty std::optional and a non-finite double are null.
//
// Laid out as nlohmann's dump(2), but written straight into one string: the step rows of
// every device (most of a large report's bytes: 29 of 38 MB for 8 ranks of 6,377 steps) field
// by field, the small parts as nlohmann values dumped in place. A report of 51,000 step rows
// never exists as a DOM, which cost a third of the report's time and doubled its memory.
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compare/comparable_json.h"
#include "report/report_writers.h"

namespace rankscope::report {

using analyzer::kReportFormat;
using analyzer::ActivityClassName;
using analyzer::ActivitySummary;
using analyzer::Breakdown;
using analyzer::ClockAlignment;
using analyzer::CollectiveKindOnRank;
using analyzer::CollectiveKindSummary;
using analyzer::CrossRank;
using analyzer::DeviceReport;
using analyzer::HostClock;
using analyzer::RankWait;
using analyzer::Report;
using analyzer::RunInfo;
using analyzer::RunMetric;
using analyzer::RunSummary;
using analyzer::Stats;
using analyzer::StepMetrics;
using analyzer::StepSelection;
using analyzer::StepStats;
using analyzer::StepWait;
using analyzer::Workload;
using compare::ComparableRunToJson;
using compare::MakeComparable;
namespace {

// Keeps the structs' field order, which reads better than sorted keys.
using Json = nlohmann::ordered_json;

// NaN and infinity are not JSON: scripts get null instead.
Json Number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

template <typename T>
Json Optional(const std::optional<T>& value) {
  if (!value) return nullptr;
  if constexpr (std::is_floating_point_v<T>) {
    return Number(*value);
  } else {
    return Json(*value);
  }
}

Json IntArray(const std::vector<int>& values) {
  Json array = Json::array();
  for (const int value : values) array.push_back(value);
  return array;
}

Json StringArray(const std::vector<std::string>& values) {
  Json array = Json::array();
  for (const std::string& value : values) array.push_back(value);
  return array;
}

// Adds the Breakdown fields to `object`: a Breakdown of its own, or flattened into a step.
void AddBreakdown(const Breakdown& breakdown, Json& object) {
  object["window_ns"] = breakdown.window_ns;
  object["compute_ns"] = breakdown.compute_ns;
  object["comm_ns"] = breakdown.comm_ns;
  object["memory_ns"] = breakdown.memory_ns;
  object["overlap_ns"] = breakdown.overlap_ns;
  object["exposed_comm_ns"] = breakdown.exposed_comm_ns;
  object["busy_ns"] = breakdown.busy_ns;
  object["idle_ns"] = breakdown.idle_ns;
  object["compute_only_ns"] = breakdown.compute_only_ns;
  object["comm_only_ns"] = breakdown.comm_only_ns;
  object["memory_only_ns"] = breakdown.memory_only_ns;
  object["overlap_pct"] = Number(breakdown.overlap_pct);
  object["comm_compute_ratio"] = Optional(breakdown.comm_compute_ratio);
  object["utilization_pct"] = Number(breakdown.utilization_pct);
}

Json BreakdownToJson(const Breakdown& breakdown) {
  Json object = Json::object();
  AddBreakdown(breakdown, object);
  return object;
}

Json StatsToJson(const Stats& stats) {
  return Json{{"count", stats.count},
              {"median", Number(stats.median)},
              {"min", Number(stats.min)},
              {"max", Number(stats.max)},
              {"p90", Number(stats.p90)}};
}

Json OptionalStats(const std::optional<Stats>& stats) { return stats ? StatsToJson(*stats) : Json(nullptr); }

Json StepStatsToJson(const StepStats& stats) {
  Json object = Json::object();
  object["step_ns"] = StatsToJson(stats.step_ns);
  object["compute_ns"] = StatsToJson(stats.compute_ns);
  object["comm_ns"] = StatsToJson(stats.comm_ns);
  object["memory_ns"] = StatsToJson(stats.memory_ns);
  object["overlap_ns"] = StatsToJson(stats.overlap_ns);
  object["exposed_comm_ns"] = StatsToJson(stats.exposed_comm_ns);
  object["busy_ns"] = StatsToJson(stats.busy_ns);
  object["idle_ns"] = StatsToJson(stats.idle_ns);
  object["overlap_pct"] = StatsToJson(stats.overlap_pct);
  object["comm_compute_ratio"] = StatsToJson(stats.comm_compute_ratio);
  object["utilization_pct"] = StatsToJson(stats.utilization_pct);
  object["wait_ns"] = StatsToJson(stats.wait_ns);
  return object;
}

Json WorkloadToJson(const Workload& workload) {
  Json object = Json::object();
  object["command"] = workload.command;
  object["backend"] = workload.backend;
  object["world_size"] = Optional(workload.world_size);
  object["batch_per_rank"] = Optional(workload.batch_per_rank);
  object["accumulation"] = Optional(workload.accumulation);
  object["global_batch"] = Optional(workload.global_batch);
  object["steps"] = Optional(workload.steps);
  object["parameters"] = Optional(workload.parameters);
  object["stages"] = Optional(workload.stages);
  object["micro_batches"] = Optional(workload.micro_batches);
  object["source"] = workload.source;
  return object;
}

Json RunInfoToJson(const RunInfo& run) {
  Json object = Json::object();
  object["directory"] = run.directory;
  object["run_id"] = run.run_id;
  object["world_size"] = Optional(run.world_size);
  object["ranks"] = IntArray(run.ranks);
  object["missing_ranks"] = IntArray(run.missing_ranks);
  object["ranks_without_activity"] = IntArray(run.ranks_without_activity);
  object["unfinished_files"] = StringArray(run.unfinished_files);
  object["live"] = run.live;
  object["events"] = run.events;
  object["invalid_events"] = run.invalid_events;
  object["dropped_events"] = run.dropped_events;
  return object;
}

Json StepSelectionToJson(const StepSelection& steps) {
  Json object = Json::object();
  object["source"] = steps.source;
  object["skip_steps"] = steps.skip_steps;
  object["first"] = Optional(steps.first);
  object["last"] = Optional(steps.last);
  object["steps_found"] = steps.steps_found;
  object["steps_aggregated"] = steps.steps_aggregated;
  return object;
}

Json ActivityToJson(const ActivitySummary& activity) {
  Json object = Json::object();
  object["name"] = activity.name;
  object["activity_class"] = ActivityClassName(activity.activity_class);
  object["count"] = activity.count;
  object["total_ns"] = activity.total_ns;
  return object;
}

Json CollectiveKindToJson(const CollectiveKindSummary& kind) {
  Json object = Json::object();
  object["kind"] = kind.kind;
  object["op"] = kind.op;
  object["count"] = kind.count;
  object["total_bytes"] = kind.total_bytes;
  object["wait_ns"] = kind.wait_ns;
  object["transfer_ns"] = kind.transfer_ns;
  object["busbw_gbps"] = OptionalStats(kind.busbw_gbps);
  Json per_rank = Json::array();
  for (const CollectiveKindOnRank& on_rank : kind.per_rank) {
    Json entry = Json::object();
    entry["rank"] = on_rank.rank;
    entry["time_ns"] = on_rank.time_ns;
    entry["end_aligned_transfer_ns"] = on_rank.end_aligned_transfer_ns;
    entry["end_aligned_wait_ns"] = on_rank.end_aligned_wait_ns;
    per_rank.push_back(std::move(entry));
  }
  object["per_rank"] = std::move(per_rank);
  return object;
}

Json HostClockToJson(const HostClock& host) {
  Json object = Json::object();
  object["host"] = host.host;
  object["ranks"] = IntArray(host.ranks);
  object["offset_ns"] = host.offset_ns;
  object["collectives_used"] = host.collectives_used;
  return object;
}

Json ClockToJson(const ClockAlignment& clock) {
  Json hosts = Json::array();
  for (const HostClock& host : clock.hosts) hosts.push_back(HostClockToJson(host));
  Json object = Json::object();
  object["hosts"] = std::move(hosts);
  object["applied"] = clock.applied;
  object["residual_ns"] = OptionalStats(clock.residual_ns);
  return object;
}

Json RankWaitToJson(const RankWait& wait) {
  Json object = Json::object();
  object["rank"] = wait.rank;
  object["wait_ns"] = wait.wait_ns;
  object["transfer_ns"] = wait.transfer_ns;
  object["times_last"] = wait.times_last;
  object["wait_caused_ns"] = wait.wait_caused_ns;
  object["steps_most_wait"] = wait.steps_most_wait;
  object["straggler"] = wait.straggler;
  return object;
}

Json StepWaitToJson(const StepWait& step) {
  Json object = Json::object();
  object["step"] = step.step;
  object["aggregated"] = step.aggregated;
  object["wait_ns"] = step.wait_ns;
  object["last_rank"] = Optional(step.last_rank);
  return object;
}

Json CrossRankToJson(const CrossRank& cross_rank) {
  Json kinds = Json::array();
  for (const CollectiveKindSummary& kind : cross_rank.kinds) kinds.push_back(CollectiveKindToJson(kind));
  Json waits = Json::array();
  for (const RankWait& wait : cross_rank.waits) waits.push_back(RankWaitToJson(wait));
  Json steps = Json::array();
  for (const StepWait& step : cross_rank.steps) steps.push_back(StepWaitToJson(step));
  Json object = Json::object();
  object["collective_source"] = cross_rank.collective_source;
  object["matched"] = cross_rank.matched;
  object["unmatched"] = cross_rank.unmatched;
  object["kinds"] = std::move(kinds);
  object["clock"] = ClockToJson(cross_rank.clock);
  object["ranks"] = IntArray(cross_rank.ranks);
  object["waits"] = std::move(waits);
  object["steps"] = std::move(steps);
  object["stragglers"] = IntArray(cross_rank.stragglers);
  object["step_time_spread"] = Optional(cross_rank.step_time_spread);
  object["compute_time_spread"] = Optional(cross_rank.compute_time_spread);
  return object;
}

Json RunMetricToJson(const RunMetric& metric) {
  Json object = Json::object();
  object["name"] = metric.name;
  object["median"] = Number(metric.median);
  object["worst"] = Number(metric.worst);
  object["worst_rank"] = metric.worst_rank;
  object["worst_device"] = metric.worst_device;
  object["higher_is_better"] = metric.higher_is_better;
  return object;
}

Json SummaryToJson(const RunSummary& summary) {
  Json metrics = Json::array();
  for (const RunMetric& metric : summary.metrics) metrics.push_back(RunMetricToJson(metric));
  Json object = Json::object();
  object["ranks"] = summary.ranks;
  object["steps"] = summary.steps;
  object["step_time_ns"] = Optional(summary.step_time_ns);
  object["throughput"] = Optional(summary.throughput);
  object["metrics"] = std::move(metrics);
  return object;
}

Json RankEndToJson(const analyzer::RankEndInfo& info) {
  Json object = Json::object();
  object["rank"] = info.rank;
  object["has_file"] = info.has_file;
  object["has_state"] = info.has_state;
  object["host"] = info.host;
  object["pid"] = info.pid;
  object["closed_cleanly"] = info.closed_cleanly;
  object["ended_by"] = info.ended_by;
  object["as_of_ns"] = info.as_of_ns;
  object["completed_collectives"] = info.completed_collectives;
  object["completed_steps"] = info.completed_steps;
  object["last_progress_ns"] = info.last_progress_ns;
  object["in_flight"] = info.in_flight;
  return object;
}

Json MemberToJson(const analyzer::CommMemberEnd& member) {
  Json object = Json::object();
  object["rank"] = Optional(member.rank);
  object["comm_rank"] = member.comm_rank;
  object["state"] = member.state;
  object["last_entered"] = Optional(member.last_entered);
  object["last_completed"] = Optional(member.last_completed);
  object["in_flight_since_ns"] = Optional(member.in_flight_since_ns);
  object["waited_ns"] = Optional(member.waited_ns);
  return object;
}

Json StalledToJson(const analyzer::StalledCollective& stalled) {
  Json object = Json::object();
  object["sequence"] = stalled.sequence;
  object["op"] = stalled.op;
  object["name"] = stalled.name;
  object["bytes"] = stalled.bytes;
  object["root"] = stalled.root;
  object["waiting"] = IntArray(stalled.waiting);
  object["missing"] = IntArray(stalled.missing);
  object["passed"] = IntArray(stalled.passed);
  object["no_state_ranks"] = IntArray(stalled.no_state_ranks);
  object["no_state_comm_ranks"] = IntArray(stalled.no_state_comm_ranks);
  object["since_ns"] = stalled.since_ns;
  object["waited_ns"] = stalled.waited_ns;
  return object;
}

Json MismatchToJson(const analyzer::CollectiveMismatch& mismatch) {
  Json versions = Json::array();
  for (const analyzer::CollectiveVersion& version : mismatch.versions) {
    Json entry = Json::object();
    entry["op"] = version.op;
    entry["name"] = version.name;
    entry["bytes"] = version.bytes;
    entry["root"] = version.root;
    entry["ranks"] = IntArray(version.ranks);
    versions.push_back(std::move(entry));
  }
  Json object = Json::object();
  object["sequence"] = mismatch.sequence;
  object["fields"] = StringArray(mismatch.fields);
  object["versions"] = std::move(versions);
  return object;
}

Json PeerStreamToJson(const analyzer::PeerStream& stream) {
  Json object = Json::object();
  object["rank"] = stream.rank;
  object["direction"] = stream.direction;
  object["peer_comm_rank"] = stream.peer_comm_rank;
  object["peer_rank"] = Optional(stream.peer_rank);
  object["last_entered"] = Optional(stream.last_entered);
  object["last_completed"] = Optional(stream.last_completed);
  object["in_flight_sequence"] = Optional(stream.in_flight_sequence);
  object["in_flight_since_ns"] = Optional(stream.in_flight_since_ns);
  object["waited_ns"] = Optional(stream.waited_ns);
  object["peer_last_entered"] = Optional(stream.peer_last_entered);
  object["peer_has_state"] = stream.peer_has_state;
  object["unmatched"] = stream.unmatched;
  return object;
}

Json CommunicatorEndToJson(const analyzer::CommunicatorEnd& comm) {
  Json members = Json::array();
  for (const analyzer::CommMemberEnd& member : comm.members) members.push_back(MemberToJson(member));
  Json mismatches = Json::array();
  for (const analyzer::CollectiveMismatch& mismatch : comm.mismatches) mismatches.push_back(MismatchToJson(mismatch));
  Json streams = Json::array();
  for (const analyzer::PeerStream& stream : comm.peer_streams) streams.push_back(PeerStreamToJson(stream));
  Json object = Json::object();
  object["comm"] = comm.comm;
  object["comm_size"] = comm.comm_size;
  object["members"] = std::move(members);
  object["stalled"] = comm.stalled ? StalledToJson(*comm.stalled) : Json(nullptr);
  object["mismatches"] = std::move(mismatches);
  object["peer_streams"] = std::move(streams);
  return object;
}

Json CulpritToJson(const analyzer::Culprit& culprit) {
  Json threads = Json::array();
  for (const analyzer::OpenThread& thread : culprit.threads) {
    Json entry = Json::object();
    entry["thread"] = thread.thread;
    entry["ranges"] = StringArray(thread.ranges);
    entry["innermost_start_ns"] = thread.innermost_start_ns;
    entry["innermost_open_ns"] = thread.innermost_open_ns;
    threads.push_back(std::move(entry));
  }
  Json object = Json::object();
  object["rank"] = culprit.rank;
  object["reasons"] = StringArray(culprit.reasons);
  object["threads"] = std::move(threads);
  return object;
}

Json HangReportToJsonValue(const analyzer::HangReport& report) {
  Json ranks = Json::array();
  for (const analyzer::RankEndInfo& info : report.ranks) ranks.push_back(RankEndToJson(info));
  Json communicators = Json::array();
  for (const analyzer::CommunicatorEnd& comm : report.communicators) {
    communicators.push_back(CommunicatorEndToJson(comm));
  }
  Json culprits = Json::array();
  for (const analyzer::Culprit& culprit : report.culprits) culprits.push_back(CulpritToJson(culprit));
  Json object = Json::object();
  object["verdict"] = analyzer::RunEndVerdictName(report.verdict);
  object["summary"] = report.summary;
  object["world_size"] = Optional(report.world_size);
  object["live"] = report.live;
  object["ranks"] = std::move(ranks);
  object["communicators"] = std::move(communicators);
  object["culprits"] = std::move(culprits);
  return object;
}

// Names come from trace files and may hold invalid UTF-8: replace rather than throw.
std::string DumpValue(const Json& value) { return value.dump(2, ' ', false, Json::error_handler_t::replace); }

std::string Dump(const Json& value) {
  std::string text = DumpValue(value);
  text += '\n';
  return text;
}

// Appends JSON to a string exactly as nlohmann's dump(2) lays it out: "{", then each member
// on its own line two spaces deeper ("key": value, comma-separated), then "}" back at the
// outer depth; empty containers as {} and []. Values are written in place, or as nlohmann
// values dumped and indented to the depth they land at.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  // The next member of the object being written: its key (a plain constant), then its value.
  void Key(std::string_view key) {
    NextItem();
    out_ += '"';
    out_ += key;
    out_ += "\": ";
  }
  // The next element of the array being written.
  void Element() { NextItem(); }
  size_t written() const { return out_.size(); }
  // Room for `bytes` more without growing.
  void Reserve(size_t bytes) { out_.reserve(out_.size() + bytes); }
  // A member: its key, then its value.
  void IntMember(std::string_view key, int64_t value) {
    Key(key);
    Int(value);
  }
  void BoolMember(std::string_view key, bool value) {
    Key(key);
    Bool(value);
  }
  void DoubleMember(std::string_view key, double value) {
    Key(key);
    Double(value);
  }
  void ValueMember(std::string_view key, const Json& value) {
    Key(key);
    Value(value);
  }

  void Int(int64_t value) {
    const fmt::format_int text(value);
    out_.append(text.data(), text.size());
  }
  void Bool(bool value) { out_ += value ? "true" : "false"; }
  // A double as nlohmann writes one (its Grisu2 shortest form, e.g. 12.0, 0.5, 1e-07), so that
  // the text is the same whether a value went through a DOM or not; non-finite is null.
  void Double(double value) {
    if (!std::isfinite(value)) {
      out_ += "null";
      return;
    }
    std::array<char, 64> buffer;
    const char* end = nlohmann::detail::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
    out_.append(buffer.data(), static_cast<size_t>(end - buffer.data()));
  }
  void OptionalDouble(const std::optional<double>& value) {
    if (value) {
      Double(*value);
    } else {
      out_ += "null";
    }
  }
  // A small value through nlohmann: dumped, each of its lines after the first indented to
  // this depth (a dump holds no raw newline inside a string, so each newline starts a line).
  void Value(const Json& value) {
    const std::string text = DumpValue(value);
    const size_t depth = 2 * depth_;
    size_t from = 0;
    for (size_t newline; (newline = text.find('\n', from)) != std::string::npos; from = newline + 1) {
      out_.append(text, from, newline + 1 - from);
      out_.append(depth, ' ');
    }
    out_.append(text, from, std::string::npos);
  }

 private:
  void NextItem() {
    out_ += items_.back()++ == 0 ? "\n" : ",\n";
    out_.append(2 * depth_, ' ');
  }
  void Open(char bracket) {
    out_ += bracket;
    items_.push_back(0);
    ++depth_;
  }
  void Close(char bracket) {
    const size_t items = items_.back();
    items_.pop_back();
    --depth_;
    if (items > 0) {
      out_ += '\n';
      out_.append(2 * depth_, ' ');
    }
    out_ += bracket;
  }

  std::string& out_;
  std::vector<size_t> items_;  // members or elements written, per open container
  size_t depth_ = 0;
};

// A step row: its window, then the Breakdown's fields flattened, then its wait.
void WriteStep(const StepMetrics& step, JsonWriter& json) {
  const Breakdown& b = step.breakdown;
  json.BeginObject();
  json.IntMember("number", step.number);
  json.IntMember("start_ns", step.start_ns);
  json.IntMember("end_ns", step.end_ns);
  json.BoolMember("aggregated", step.aggregated);
  json.IntMember("window_ns", b.window_ns);
  json.IntMember("compute_ns", b.compute_ns);
  json.IntMember("comm_ns", b.comm_ns);
  json.IntMember("memory_ns", b.memory_ns);
  json.IntMember("overlap_ns", b.overlap_ns);
  json.IntMember("exposed_comm_ns", b.exposed_comm_ns);
  json.IntMember("busy_ns", b.busy_ns);
  json.IntMember("idle_ns", b.idle_ns);
  json.IntMember("compute_only_ns", b.compute_only_ns);
  json.IntMember("comm_only_ns", b.comm_only_ns);
  json.IntMember("memory_only_ns", b.memory_only_ns);
  json.DoubleMember("overlap_pct", b.overlap_pct);
  json.Key("comm_compute_ratio");
  json.OptionalDouble(b.comm_compute_ratio);
  json.DoubleMember("utilization_pct", b.utilization_pct);
  json.IntMember("wait_ns", step.wait_ns);
  json.EndObject();
}

// The step rows: once the first is written, the string is sized for all of them (with room
// for longer numbers), so it grows once instead of doubling its way to tens of megabytes.
void WriteSteps(const std::vector<StepMetrics>& steps, size_t rows_after_these, JsonWriter& json, bool& reserved) {
  json.BeginArray();
  for (const StepMetrics& step : steps) {
    const size_t before = json.written();
    json.Element();
    WriteStep(step, json);
    if (!reserved) {
      reserved = true;
      const size_t rows_left = steps.size() - 1 + rows_after_these;
      json.Reserve((json.written() - before) * 5 / 4 * rows_left + (size_t{1} << 20));
    }
  }
  json.EndArray();
}

void WriteDevice(const DeviceReport& device, size_t rows_after, JsonWriter& json, bool& reserved) {
  json.BeginObject();
  json.IntMember("rank", device.rank);
  json.IntMember("device", device.device);
  json.ValueMember("host", device.host);
  json.ValueMember("totals", BreakdownToJson(device.totals));
  json.Key("steps");
  WriteSteps(device.steps, rows_after, json, reserved);
  json.ValueMember("step_stats", StepStatsToJson(device.step_stats));
  json.IntMember("wait_ns", device.wait_ns);
  json.IntMember("transfer_ns", device.transfer_ns);
  json.EndObject();
}

Json CriticalPathToJson(const analyzer::CriticalPathSummary& path) {
  Json categories = Json::object();
  for (const auto& [category, share] : path.categories) categories[category] = share;
  Json top = Json::array();
  for (const analyzer::PathContribution& c : path.top) {
    top.push_back({{"category", c.category}, {"rank", c.rank}, {"name", c.name}, {"ns_per_step", c.ns_per_step},
                   {"share", c.share}});
  }
  Json waits = Json::array();
  for (const analyzer::PathWaitSummary& w : path.waits) {
    waits.push_back({{"waiting_rank", w.waiting_rank}, {"late_rank", w.late_rank}, {"collective", w.collective},
                     {"late_doing", w.late_doing}, {"ns_per_step", w.ns_per_step}, {"steps", w.steps}});
  }
  Json what_ifs = Json::array();
  for (const analyzer::WhatIfSummary& w : path.what_ifs) {
    what_ifs.push_back({{"label", w.label}, {"projected_step_ns", w.projected_step_ns}, {"gain", w.gain}});
  }
  return {{"steps", path.steps},           {"steps_aggregated", path.steps_aggregated},
          {"measured_step_ns", path.measured_step_ns},
          {"path_ns", path.path_ns},       {"max_mismatch_ns", path.max_mismatch_ns},
          {"categories", categories},      {"top", top},
          {"waits", waits},                {"what_ifs", what_ifs},
          {"notes", StringArray(path.notes)}};
}

Json ParallelismToJson(const analyzer::Parallelism& parallelism) {
  Json object = Json::object();
  object["strategy"] = parallelism.strategy;
  object["strategy_source"] = parallelism.strategy_source;
  object["point_to_point"] = nullptr;
  if (const auto& p2p = parallelism.point_to_point) {
    Json routes = Json::array();
    for (const analyzer::MessageRoute& route : p2p->routes) {
      routes.push_back({{"from_rank", route.from_rank},
                        {"to_rank", route.to_rank},
                        {"count", route.count},
                        {"total_bytes", route.total_bytes},
                        {"receiver_wait_ns", route.receiver_wait_ns},
                        {"sender_wait_ns", route.sender_wait_ns},
                        {"transfer_ns", route.transfer_ns},
                        {"bandwidth_gbps", OptionalStats(route.bandwidth_gbps)}});
    }
    object["point_to_point"] = {{"matched", p2p->matched}, {"unmatched", p2p->unmatched}, {"routes", routes}};
  }
  object["pipeline"] = nullptr;
  if (const auto& pipeline = parallelism.pipeline) {
    Json stages = Json::array();
    for (const analyzer::PipelineStageFigures& row : pipeline->stage_rows) {
      stages.push_back({{"rank", row.rank},
                        {"stage", row.stage},
                        {"replica", row.replica},
                        {"steps", row.steps},
                        {"window_ns", row.window_ns},
                        {"busy_ns", row.busy_ns},
                        {"bubble_pct", Number(row.bubble_pct)},
                        {"neighbour_wait_ns", row.neighbour_wait_ns},
                        {"transfer_ns", row.transfer_ns},
                        {"other_idle_ns", row.other_idle_ns},
                        {"busy_vs_mean", Number(row.busy_vs_mean)}});
    }
    object["pipeline"] = {{"stages", pipeline->stages},
                          {"micro_batches", pipeline->micro_batches},
                          {"replicas", pipeline->replicas},
                          {"ideal_bubble_pct", Number(pipeline->ideal_bubble_pct)},
                          {"bubble_pct", Number(pipeline->bubble_pct)},
                          {"window_ns", pipeline->window_ns},
                          {"balanced_window_ns", pipeline->balanced_window_ns},
                          {"imbalance_ns", pipeline->imbalance_ns},
                          {"communication_ns", pipeline->communication_ns},
                          {"stage_rows", stages},
                          {"diagnosis", pipeline->diagnosis}};
  }
  object["fsdp"] = nullptr;
  if (const auto& fsdp = parallelism.fsdp) {
    Json layers = Json::array();
    for (const analyzer::FsdpLayerFigures& layer : fsdp->layers) {
      layers.push_back({{"layer", layer.layer},
                        {"all_gathers", Number(layer.all_gathers)},
                        {"gather_ns", Number(layer.gather_ns)},
                        {"exposed_gather_ns", Number(layer.exposed_gather_ns)},
                        {"reduce_scatter_ns", Number(layer.reduce_scatter_ns)},
                        {"exposed_reduce_scatter_ns", Number(layer.exposed_reduce_scatter_ns)}});
    }
    object["fsdp"] = {{"layers", layers},
                      {"gather_ns", Number(fsdp->gather_ns)},
                      {"exposed_gather_ns", Number(fsdp->exposed_gather_ns)},
                      {"exposed_gather_pct", Optional(fsdp->exposed_gather_pct)}};
  }
  return object;
}

}  // namespace

std::string ReportToJson(const Report& report) {
  std::string out;
  JsonWriter json(out);
  json.BeginObject();
  json.ValueMember("format", kReportFormat);
  json.ValueMember("version", report.version);
  json.ValueMember("tool_version", report.tool_version);
  json.ValueMember("run", RunInfoToJson(report.run));
  json.ValueMember("workload", WorkloadToJson(report.workload));
  json.ValueMember("steps", StepSelectionToJson(report.steps));
  json.ValueMember("comm_patterns", StringArray(report.comm_patterns));
  json.ValueMember("compute_patterns", StringArray(report.compute_patterns));
  json.ValueMember("summary", SummaryToJson(report.summary));
  json.Key("ranks");
  json.BeginArray();
  size_t rows_after = 0;
  for (const DeviceReport& device : report.ranks) rows_after += device.steps.size();
  bool reserved = false;
  for (const DeviceReport& device : report.ranks) {
    rows_after -= device.steps.size();
    json.Element();
    WriteDevice(device, rows_after, json, reserved);
  }
  json.EndArray();
  Json activities = Json::array();
  for (const ActivitySummary& activity : report.top_activities) activities.push_back(ActivityToJson(activity));
  json.ValueMember("top_activities", activities);
  json.ValueMember("cross_rank", CrossRankToJson(report.cross_rank));
  json.ValueMember("parallelism", ParallelismToJson(report.parallelism));
  Json memory = Json::array();
  for (const analyzer::RankMemory& rank : report.memory) {
    const auto bytes_of = [](const std::vector<analyzer::MemoryCategoryBytes>& entries) {
      Json object = Json::object();
      for (const analyzer::MemoryCategoryBytes& entry : entries) object[entry.category] = entry.bytes;
      return object;
    };
    memory.push_back({{"rank", rank.rank},
                      {"source", rank.source},
                      {"peak_bytes", rank.peak_bytes},
                      {"peak_at_ns", rank.peak_at_ns},
                      {"at_peak", bytes_of(rank.at_peak)},
                      {"category_peaks", bytes_of(rank.category_peaks)},
                      {"step_peak_bytes", OptionalStats(rank.step_peak_bytes)}});
  }
  json.ValueMember("memory", memory);
  json.ValueMember("warnings", StringArray(report.warnings));
  // Only for a run that did not finish, so the reports of finished runs keep their keys.
  if (report.did_not_finish) json.ValueMember("did_not_finish", HangReportToJsonValue(*report.did_not_finish));
  // Only with --critical-path.
  if (report.critical_path) json.ValueMember("critical_path", CriticalPathToJson(*report.critical_path));
  // What `rankscope compare` and `scale` read back: the report doubles as a baseline.
  json.ValueMember("comparable", ComparableRunToJson(MakeComparable(report)));
  json.EndObject();
  out += '\n';
  return out;
}

std::string HangReportToJson(const analyzer::HangReport& report) { return Dump(HangReportToJsonValue(report)); }

}  // namespace rankscope::report
