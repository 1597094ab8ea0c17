#include "tests/rank_file_dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>

#include "trace/reader.h"
#include "trace/schema.h"

namespace rankscope::testing {
namespace {

// The one place that decides which meta values a golden file may not hold as they are: they
// differ on every import of the same input. The key stays, so its presence is still checked.
std::optional<std::string> MaskedMetaValue(std::string_view key) {
  if (key == trace::meta_key::kRunId) return "<run id: new on every import>";
  if (key == trace::meta_key::kCreatedRealtimeNs) return "<time the file was written>";
  if (key.starts_with(trace::meta_key::kClockPrefix)) return "<clock reading when the file was written>";
  if (key == trace::meta_key::kToolVersion) return "<version of this build>";
  return std::nullopt;
}

// Text in double quotes, with quotes, backslashes and control bytes escaped; other bytes
// (UTF-8 included) as they are.
std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// An enumeration's name in the file's schema ("HtoD"), or "?<value>" for a value it lacks.
template <typename Enum>
std::string EnumName(std::string_view type, Enum value) {
  const int number = static_cast<int>(value);
  for (const trace::EnumValue& known : trace::EnumValues()) {
    if (known.type == type && known.value == number) return std::string(known.name);
  }
  return fmt::format("?{}", number);
}

std::string Dim(const trace::Dim3& dim) { return fmt::format("{}x{}x{}", dim.x, dim.y, dim.z); }

std::string PayloadText(const trace::Payload& payload) {
  switch (payload.kind) {
    case trace::PayloadKind::kNone:
      return "none";
    case trace::PayloadKind::kDouble:
    case trace::PayloadKind::kFloat:
      return fmt::format("{}:{}", EnumName("payload_kind", payload.kind), payload.real_value);
    default:
      return fmt::format("{}:{}", EnumName("payload_kind", payload.kind), payload.int_value);
  }
}

// One event table: its lines sorted by (lane, start, end, name), the whole line breaking
// any remaining tie, so the order is canonical.
class TableDump {
 public:
  explicit TableDump(std::string title) : title_(std::move(title)) {}

  void Add(trace::LaneId lane, int64_t start, int64_t end, std::string name, std::string fields) {
    std::string line = fmt::format("  lane {} [{}, {}) {}", lane, start, end, Quote(name));
    if (!fields.empty()) line += " " + fields;
    rows_.push_back({lane, start, end, std::move(name), std::move(line)});
  }

  void AppendTo(std::string& out) {
    std::sort(rows_.begin(), rows_.end(), [](const Row& a, const Row& b) {
      return std::tie(a.lane, a.start, a.end, a.name, a.line) < std::tie(b.lane, b.start, b.end, b.name, b.line);
    });
    out += fmt::format("{} ({})\n", title_, rows_.size());
    for (const Row& row : rows_) out += row.line + "\n";
  }

 private:
  struct Row {
    trace::LaneId lane;
    int64_t start, end;
    std::string name, line;
  };
  std::string title_;
  std::vector<Row> rows_;
};

std::string NvtxFields(const trace::RankTrace& rank, const trace::NvtxAttributes& nvtx) {
  return fmt::format("domain={} category={} color=0x{:08x} payload={} args={}", Quote(rank.str(nvtx.domain)),
                     nvtx.category, nvtx.color, PayloadText(nvtx.payload), Quote(rank.str(nvtx.args)));
}

std::string Dump(const trace::RankTrace& rank, const std::map<std::string, std::string>& meta) {
  std::string out;
  out += fmt::format("meta ({})\n", meta.size());
  for (const auto& [key, value] : meta) {
    const std::optional<std::string> masked = MaskedMetaValue(key);
    out += fmt::format("  {} = {}\n", key, masked ? *masked : Quote(value));
  }

  std::vector<std::string> sorted_strings(rank.strings.begin(), rank.strings.end());
  std::sort(sorted_strings.begin(), sorted_strings.end());
  out += fmt::format("strings ({}, by text)\n", sorted_strings.size());
  for (const std::string& text : sorted_strings) out += "  " + Quote(text) + "\n";

  out += fmt::format("lanes ({})\n", rank.lanes.size());
  for (const trace::Lane& lane : rank.lanes) {
    out += fmt::format(
        "  lane {} {} role={} device={} context={} stream={} pid={} tid={} comm_hash=0x{:x} name={} "
        "max_duration={}\n",
        lane.id, EnumName("lane_kind", lane.kind), EnumName("lane_role", lane.role), lane.device, lane.context,
        lane.stream, lane.pid, lane.tid, lane.comm_hash, Quote(lane.name), lane.max_duration_ns);
  }

  std::vector<std::string> drop_lines;
  for (const trace::DropRecord& drop : rank.drops) {
    drop_lines.push_back(fmt::format("  source={} reason={} device={} context={} stream={} count={}",
                                     Quote(drop.source), Quote(drop.reason), drop.device, drop.context, drop.stream,
                                     drop.count));
  }
  std::sort(drop_lines.begin(), drop_lines.end());
  out += fmt::format("drops ({})\n", drop_lines.size());
  for (const std::string& line : drop_lines) out += line + "\n";

  const trace::EventTables& e = rank.events;
  TableDump kernels("kernels");
  for (const trace::KernelEvent& k : e.kernels) {
    kernels.Add(k.lane, k.start_ns, k.end_ns, rank.str(k.name),
                fmt::format("correlation={} grid={} block={} registers={} static_shared={} dynamic_shared={}",
                            k.correlation_id, Dim(k.grid), Dim(k.block), k.registers_per_thread,
                            k.static_shared_bytes, k.dynamic_shared_bytes));
  }
  kernels.AppendTo(out);

  TableDump memcpys("memcpys");
  for (const trace::MemcpyEvent& c : e.memcpys) {
    memcpys.Add(c.lane, c.start_ns, c.end_ns, rank.str(c.name),
                fmt::format("correlation={} bytes={} kind={} src={} dst={} src_device={} dst_device={}",
                            c.correlation_id, c.bytes, EnumName("copy_kind", c.copy_kind),
                            EnumName("memory_kind", c.src_kind), EnumName("memory_kind", c.dst_kind), c.src_device,
                            c.dst_device));
  }
  memcpys.AppendTo(out);

  TableDump memsets("memsets");
  for (const trace::MemsetEvent& m : e.memsets) {
    memsets.Add(m.lane, m.start_ns, m.end_ns, rank.str(m.name),
                fmt::format("correlation={} bytes={} value={} memory={}", m.correlation_id, m.bytes, m.value,
                            EnumName("memory_kind", m.memory_kind)));
  }
  memsets.AppendTo(out);

  TableDump api_calls("api_calls");
  for (const trace::ApiCallEvent& a : e.api_calls) {
    api_calls.Add(a.lane, a.start_ns, a.end_ns, rank.str(a.name),
                  fmt::format("correlation={} domain={} callback={} return={} external={}", a.correlation_id,
                              EnumName("api_domain", a.domain), a.callback_id, a.return_code, a.external_id));
  }
  api_calls.AppendTo(out);

  TableDump syncs("syncs");
  for (const trace::SyncEvent& s : e.syncs) {
    syncs.Add(s.lane, s.start_ns, s.end_ns, rank.str(s.name),
              fmt::format("correlation={} kind={} context={} stream={} cuda_event={}", s.correlation_id,
                          EnumName("sync_kind", s.sync_kind), s.context, s.stream, s.cuda_event_id));
  }
  syncs.AppendTo(out);

  TableDump ranges("nvtx_ranges");
  for (const trace::NvtxRangeEvent& r : e.nvtx_ranges) {
    ranges.Add(r.lane, r.start_ns, r.end_ns, rank.str(r.name),
               fmt::format("correlation={} style={} end_lane={} {}", r.correlation_id,
                           EnumName("nvtx_range_style", r.style), r.end_lane, NvtxFields(rank, r)));
  }
  ranges.AppendTo(out);

  TableDump marks("nvtx_marks");
  for (const trace::NvtxMarkEvent& m : e.nvtx_marks) {
    marks.Add(m.lane, m.start_ns, m.end_ns, rank.str(m.name),
              fmt::format("correlation={} {}", m.correlation_id, NvtxFields(rank, m)));
  }
  marks.AppendTo(out);

  TableDump collectives("collectives");
  for (const trace::CollectiveEvent& c : e.collectives) {
    collectives.Add(
        c.lane, c.start_ns, c.end_ns, rank.str(c.name),
        fmt::format("correlation={} comm_hash=0x{:x} sequence={} op={} reduce={} datatype={} bytes={} root={} "
                    "peer={} comm_rank={} comm_size={} channels={} algorithm={} protocol={}",
                    c.correlation_id, c.comm_hash, c.sequence, EnumName("collective_op", c.op),
                    EnumName("reduce_op", c.reduce_op), EnumName("datatype", c.datatype), c.bytes, c.root, c.peer,
                    c.comm_rank, c.comm_size, c.channels, Quote(rank.str(c.algorithm)),
                    Quote(rank.str(c.protocol))));
  }
  collectives.AppendTo(out);

  TableDump parts("collective_parts");
  for (const trace::CollectivePartEvent& p : e.collective_parts) {
    parts.Add(p.lane, p.start_ns, p.end_ns, rank.str(p.name),
              fmt::format("correlation={} comm_hash=0x{:x} sequence={} kind={} channel={} peer={} step={} bytes={}",
                          p.correlation_id, p.comm_hash, p.sequence, EnumName("collective_part_kind", p.part_kind),
                          p.channel, p.peer, p.step, p.bytes));
  }
  parts.AppendTo(out);

  TableDump overheads("overheads");
  for (const trace::OverheadEvent& o : e.overheads) {
    overheads.Add(o.lane, o.start_ns, o.end_ns, rank.str(o.name),
                  fmt::format("correlation={} kind={}", o.correlation_id,
                              EnumName("overhead_kind", o.overhead_kind)));
  }
  overheads.AppendTo(out);

  // Counter samples are instants with a value and no name.
  TableDump counters("counter_samples");
  for (const trace::CounterSample& c : e.counter_samples) {
    counters.Add(c.lane, c.ts_ns, c.ts_ns, "", fmt::format("value={}", c.value));
  }
  counters.AppendTo(out);
  return out;
}

}  // namespace

Result<std::string> DumpRankFile(const std::filesystem::path& file) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(file));
  RS_ASSIGN_OR_RETURN(trace::RankTrace rank, reader->LoadAll());
  return Dump(rank, reader->meta().entries);
}

Result<std::string> DumpRankFiles(const std::vector<std::filesystem::path>& files,
                                  const std::vector<std::string>& notes,
                                  const std::vector<std::pair<std::filesystem::path, std::string>>& placeholders) {
  std::string out = fmt::format("notes ({})\n", notes.size());
  for (const std::string& note : notes) out += "  " + note + "\n";
  for (const std::filesystem::path& file : files) {
    RS_ASSIGN_OR_RETURN(std::string dump, DumpRankFile(file));
    out += fmt::format("\n=== {}\n", file.filename().string());
    out += dump;
  }
  return WithoutPaths(std::move(out), placeholders);
}

std::string WithoutPaths(std::string text,
                         const std::vector<std::pair<std::filesystem::path, std::string>>& placeholders) {
  std::vector<std::pair<std::string, std::string>> by_length;
  for (const auto& [path, placeholder] : placeholders) by_length.emplace_back(path.string(), placeholder);
  std::stable_sort(by_length.begin(), by_length.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [path, placeholder] : by_length) {
    if (path.empty()) continue;
    for (size_t at = text.find(path); at != std::string::npos; at = text.find(path, at + placeholder.size())) {
      text.replace(at, path.size(), placeholder);
    }
  }
  return text;
}

}  // namespace rankscope::testing
