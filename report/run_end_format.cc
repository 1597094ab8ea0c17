// The diagnosis of a run that did not finish (analyzer/hang.h) as the tables and lines every
// writer lays out: per communicator its members' positions, sends and receives in flight,
// mismatches, then the culprits and how each file ended.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/hang.h"
#include "report/report_format.h"

namespace rankscope::report {

using analyzer::CollectiveMismatch;
using analyzer::CollectiveTitle;
using analyzer::CollectiveVersion;
using analyzer::CommMemberEnd;
using analyzer::CommunicatorEnd;
using analyzer::CompactRanks;
using analyzer::Culprit;
using analyzer::HangReport;
using analyzer::OpenThread;
using analyzer::PeerStream;
using analyzer::RankEndInfo;
using analyzer::RanksPhrase;
namespace {

std::string Sequence(const std::optional<uint64_t>& sequence) {
  return sequence ? fmt::format("#{}", *sequence) : "-";
}

std::string Waited(const std::optional<int64_t>& ns) {
  return ns ? format::FormatDuration(static_cast<double>(*ns)) : "-";
}

// Rows whose cells after the first agree become one row, their ranks listed compactly in
// the first cell: a thousand waiting ranks are one line. Each row comes with its rank
// (nullopt: a row of its own, first cell as given); groups keep the order of their first row.
void AddGroupedRows(const std::vector<std::pair<std::optional<int>, std::vector<std::string>>>& rows, Table& table) {
  std::vector<std::pair<std::vector<int>, std::vector<std::string>>> groups;
  std::map<std::vector<std::string>, size_t> group_of;
  for (const auto& [rank, cells] : rows) {
    if (!rank) {
      groups.push_back({{}, cells});
      continue;
    }
    const std::vector<std::string> rest(cells.begin() + 1, cells.end());
    auto [it, inserted] = group_of.emplace(rest, groups.size());
    if (inserted) groups.push_back({{}, cells});
    groups[it->second].first.push_back(*rank);
  }
  for (auto& [ranks, cells] : groups) {
    if (!ranks.empty()) cells[0] = CompactRanks(ranks);
    table.rows.push_back(std::move(cells));
  }
}

std::string VersionText(const CollectiveVersion& version) {
  std::string text = fmt::format("{} {}", RanksPhrase(version.ranks), CollectiveTitle(version.op, version.name));
  text += " of " + format::FormatBytes(static_cast<double>(version.bytes));
  if (version.root >= 0) text += fmt::format(", root {}", version.root);
  return text;
}

}  // namespace

std::string RunEndHeading(const HangReport& report) {
  return fmt::format("Did not finish: {}", analyzer::RunEndVerdictName(report.verdict));
}

std::vector<const CommunicatorEnd*> CommunicatorsToShow(const HangReport& report) {
  // 0: a collective some rank never entered; 1: a send or receive never matched; 2: a
  // mismatch; 3: anything else in flight; 4: nothing to show.
  auto order = [](const CommunicatorEnd& comm) {
    if (comm.stalled && !comm.stalled->missing.empty()) return 0;
    bool in_flight = comm.stalled.has_value();
    for (const PeerStream& stream : comm.peer_streams) {
      if (stream.unmatched) return 1;
      in_flight = in_flight || stream.in_flight_sequence.has_value();
    }
    if (!comm.mismatches.empty()) return 2;
    return in_flight ? 3 : 4;
  };
  std::vector<std::pair<int, const CommunicatorEnd*>> ordered;
  for (const CommunicatorEnd& comm : report.communicators) {
    if (const int rank = order(comm); rank < 4) ordered.emplace_back(rank, &comm);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const CommunicatorEnd*> shown;
  for (const auto& [rank, comm] : ordered) shown.push_back(comm);
  return shown;
}

bool HasCollectives(const CommunicatorEnd& comm) {
  if (comm.stalled) return true;
  for (const CommMemberEnd& member : comm.members) {
    if (member.last_entered) return true;
  }
  return false;
}

std::string CommunicatorLine(const CommunicatorEnd& comm) {
  std::string line = "communicator " + comm.comm;
  if (comm.comm_size > 0) line += fmt::format(", {} ranks", comm.comm_size);
  if (comm.stalled) {
    const analyzer::StalledCollective& stalled = *comm.stalled;
    line += fmt::format(": {} #{} of {} stalled", CollectiveTitle(stalled.op, stalled.name), stalled.sequence,
                        format::FormatBytes(static_cast<double>(stalled.bytes)));
    if (!stalled.waiting.empty()) {
      line += fmt::format(", waited in for {} by {}", format::FormatDuration(static_cast<double>(stalled.waited_ns)),
                          RanksPhrase(stalled.waiting));
    }
    if (!stalled.missing.empty()) line += fmt::format("; never entered by {}", RanksPhrase(stalled.missing));
  } else {
    line += ": no collective stalled";
  }
  return line;
}

Table CommunicatorTable(const CommunicatorEnd& comm) {
  Table table;
  table.header = {"ranks", "state", "last entered", "last completed", "in flight for"};
  table.numeric = {false, false, true, true, true};
  std::vector<std::pair<std::optional<int>, std::vector<std::string>>> rows;
  for (const CommMemberEnd& member : comm.members) {
    const std::string first =
        member.rank ? std::to_string(*member.rank) : fmt::format("comm rank {}", member.comm_rank);
    rows.push_back({member.rank,
                    {first, member.state, Sequence(member.last_entered), Sequence(member.last_completed),
                     Waited(member.waited_ns)}});
  }
  AddGroupedRows(rows, table);
  return table;
}

Table PeerStreamTable(const CommunicatorEnd& comm) {
  Table table;
  table.header = {"rank", "op", "peer", "last entered", "last completed", "in flight for", "peer's last match"};
  table.numeric = {true, false, false, true, true, true, true};
  for (const PeerStream& stream : comm.peer_streams) {
    if (!stream.in_flight_sequence) continue;
    const std::string peer = stream.peer_rank ? fmt::format("rank {}", *stream.peer_rank)
                                              : fmt::format("comm rank {}", stream.peer_comm_rank);
    std::string match = stream.peer_has_state ? Sequence(stream.peer_last_entered) : "unknown";
    if (stream.unmatched) match += fmt::format(" (never entered #{})", *stream.in_flight_sequence);
    table.rows.push_back({std::to_string(stream.rank), stream.direction == "send" ? "send to" : "recv from", peer,
                          Sequence(stream.last_entered), Sequence(stream.last_completed), Waited(stream.waited_ns),
                          match});
  }
  return table;
}

std::vector<std::string> MismatchLines(const CommunicatorEnd& comm) {
  std::vector<std::string> lines;
  for (const CollectiveMismatch& mismatch : comm.mismatches) {
    std::vector<std::string> versions;
    for (const CollectiveVersion& version : mismatch.versions) versions.push_back(VersionText(version));
    lines.push_back(fmt::format("mismatch in {} at #{}: {}", fmt::join(mismatch.fields, " and "), mismatch.sequence,
                                fmt::join(versions, "; ")));
  }
  return lines;
}

std::vector<std::string> CulpritLines(const HangReport& report) {
  std::vector<std::string> lines;
  for (const Culprit& culprit : report.culprits) {
    std::vector<std::string> threads;
    for (const OpenThread& thread : culprit.threads) {
      threads.push_back(fmt::format("{}: {} ({})", thread.thread, fmt::join(thread.ranges, " \u203a "),
                                    format::FormatDuration(static_cast<double>(thread.innermost_open_ns))));
    }
    const std::string activity =
        threads.empty() ? std::string("no open range") : fmt::format("{}", fmt::join(threads, "; "));
    lines.push_back(fmt::format("rank {} ({}): {}", culprit.rank, fmt::join(culprit.reasons, ", "), activity));
  }
  return lines;
}

std::string RankEndsLine(const HangReport& report) {
  std::map<std::string, std::vector<int>> by_ending;
  for (const RankEndInfo& info : report.ranks) {
    std::string ending = !info.has_file         ? "no file"
                         : !info.closed_cleanly ? "never closed"
                         : info.ended_by.empty() ? "closed"
                                                 : "ended by " + info.ended_by;
    if (info.has_file && !info.has_state) ending += ", no in-flight state";
    by_ending[ending].push_back(info.rank);
  }
  std::vector<std::string> parts;
  for (const auto& [ending, ranks] : by_ending) parts.push_back(fmt::format("{}: {}", RanksPhrase(ranks), ending));
  return "files: " + fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace rankscope::report
