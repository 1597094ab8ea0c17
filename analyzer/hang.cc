#include "analyzer/hang.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "analyzer/rank_scan.h"
#include "base/format.h"
#include "base/launch_env.h"
#include "base/text.h"

namespace rankscope::analyzer {

using trace::CollectiveOp;
using trace::FlightCollective;
using trace::InFlightState;

const char* RunEndVerdictName(RunEndVerdict verdict) {
  switch (verdict) {
    case RunEndVerdict::kFinished: return "finished";
    case RunEndVerdict::kHang: return "hang";
    case RunEndVerdict::kMismatch: return "mismatch";
    case RunEndVerdict::kKilled: return "killed";
    case RunEndVerdict::kUnfinished: return "unfinished";
  }
  return "unfinished";
}

std::string CompactRanks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    auto append = [&out](const std::string& piece) { out += (out.empty() ? "" : ", ") + piece; };
    if (j - i >= 2) {
      append(fmt::format("{}-{}", ranks[i], ranks[j]));
    } else {
      for (size_t k = i; k <= j; ++k) append(std::to_string(ranks[k]));
    }
    i = j + 1;
  }
  return out;
}

std::string RanksPhrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + CompactRanks(ranks);
}

std::string CommHashText(uint64_t comm_hash) { return fmt::format("{:016x}", comm_hash); }

std::string CollectiveTitle(std::string_view op, std::string_view name) {
  static constexpr std::pair<std::string_view, std::string_view> kTitles[] = {
      {"allreduce", "AllReduce"}, {"allgather", "AllGather"}, {"reducescatter", "ReduceScatter"},
      {"broadcast", "Broadcast"}, {"reduce", "Reduce"},       {"alltoall", "AllToAll"},
      {"send", "Send"},           {"recv", "Recv"},           {"barrier", "Barrier"},
      {"gather", "Gather"},       {"scatter", "Scatter"},
  };
  for (const auto& [key, title] : kTitles) {
    if (op == key) return std::string(title);
  }
  return name.empty() ? std::string("collective") : std::string(name);
}

namespace {

// The op a record names, from its name when the source gave none.
CollectiveOp EffectiveOp(const FlightCollective& c) {
  return c.op != CollectiveOp::kUnknown ? c.op : OpFromName(c.name);
}

bool IsPointToPoint(CollectiveOp op) { return op == CollectiveOp::kSend || op == CollectiveOp::kRecv; }

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// On one rank's own clock: from `start` to its state time; 0 when that is not a duration.
int64_t WaitedSince(const InFlightState& state, int64_t start) {
  return trace::CheckedDuration(start, state.as_of_ns).value_or(0);
}

std::string Duration(int64_t ns) { return format::FormatDuration(static_cast<double>(ns)); }

std::string Capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

bool EndedFinished(const RankEnd& rank) {
  // A writer that closed the file without saying why (an importer, an older collector)
  // counts as finished; a signal, or no close at all, does not.
  return rank.closed_cleanly && (rank.ended_by.empty() || rank.ended_by == "exit" || rank.ended_by == "exec");
}

// Where one rank got on one stream of entries (a communicator's collectives, or its sends
// to / receives from one peer).
struct Position {
  std::optional<uint64_t> last_entered;
  std::optional<uint64_t> last_completed;
  const FlightCollective* oldest_in_flight = nullptr;  // the lowest sequence in flight
};

Position PositionOf(const std::vector<const FlightCollective*>& entries) {
  Position position;
  for (const FlightCollective* c : entries) {
    position.last_entered = std::max(position.last_entered.value_or(0), c->sequence);
    if (!c->in_flight()) {
      position.last_completed = std::max(position.last_completed.value_or(0), c->sequence);
    } else if (position.oldest_in_flight == nullptr || c->sequence < position.oldest_in_flight->sequence) {
      position.oldest_in_flight = c;
    }
  }
  return position;
}

const FlightCollective* AtSequence(const std::vector<const FlightCollective*>& entries, uint64_t sequence) {
  for (const FlightCollective* c : entries) {
    if (c->sequence == sequence) return c;
  }
  return nullptr;
}

// One rank's entries on one communicator.
struct RankOnComm {
  const RankEnd* rank = nullptr;
  int comm_rank = -1;
  std::vector<const FlightCollective*> collectives;
  // Sends to / receives from each peer: (op, peer communicator rank) -> entries.
  std::map<std::pair<CollectiveOp, int>, std::vector<const FlightCollective*>> peer_streams;
};

struct CommInput {
  int comm_size = 0;
  std::map<int, RankOnComm> ranks;        // by rank
  std::map<int, int> rank_of_comm_rank;  // from the entries
};

// What a rank entered at a sequence, as mismatches compare it: the op (the lower-case name
// when the op is unknown), the size and the root.
struct Signature {
  CollectiveOp op = CollectiveOp::kUnknown;
  std::string unknown_name;
  uint64_t bytes = 0;
  int root = -1;
  auto operator<=>(const Signature&) const = default;
};

Signature SignatureOf(const FlightCollective& c) {
  const CollectiveOp op = EffectiveOp(c);
  return {op, op == CollectiveOp::kUnknown ? Lower(c.name) : std::string(), c.bytes, c.root};
}

std::string VersionText(const CollectiveVersion& version) {
  std::string text = CollectiveTitle(version.op, version.name) + " of " +
                     format::FormatBytes(static_cast<double>(version.bytes));
  if (version.root >= 0) text += fmt::format(" from root {}", version.root);
  return text;
}

// The culprits found so far, with their reasons in the order found.
class CulpritList {
 public:
  void Add(int rank, const std::string& reason) {
    std::vector<std::string>& reasons = reasons_[rank];
    if (std::find(reasons.begin(), reasons.end(), reason) == reasons.end()) reasons.push_back(reason);
  }
  const std::map<int, std::vector<std::string>>& reasons() const { return reasons_; }

 private:
  std::map<int, std::vector<std::string>> reasons_;
};

std::vector<OpenThread> OpenThreadsOf(const RankEnd& rank) {
  std::map<trace::LaneId, std::vector<const trace::OpenRange*>> by_lane;
  for (const trace::OpenRange& range : rank.state.open_ranges) by_lane[range.lane].push_back(&range);
  std::vector<OpenThread> threads;
  for (auto& [lane, ranges] : by_lane) {
    // Outermost first: ranges of several domains nest in time, each domain's by depth.
    std::stable_sort(ranges.begin(), ranges.end(), [](const trace::OpenRange* a, const trace::OpenRange* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->depth < b->depth;
    });
    OpenThread thread;
    const bool named = lane >= 1 && lane <= rank.lane_names.size() && !rank.lane_names[lane - 1].empty();
    thread.thread = named ? rank.lane_names[lane - 1] : fmt::format("lane {}", lane);
    for (const trace::OpenRange* range : ranges) {
      thread.ranges.push_back(range->name.empty() ? "(unnamed)" : range->name);
    }
    thread.innermost_start_ns = ranges.back()->start_ns;
    thread.innermost_open_ns = WaitedSince(rank.state, thread.innermost_start_ns);
    threads.push_back(std::move(thread));
  }
  return threads;
}

// The paragraph stays short on a large job: this many sentences per kind of finding, and
// this many culprits' open ranges; the rest is in the structured report.
constexpr size_t kFindingsPerKind = 3;
constexpr size_t kCulpritsInSummary = 3;

class Diagnosis {
 public:
  Diagnosis(const std::vector<RankEnd>& ranks, std::optional<int> world_size, bool live)
      : world_size_(world_size), live_(live) {
    for (const RankEnd& rank : ranks) by_rank_.emplace(rank.rank, &rank);  // the first of a rank wins
    if (world_size) {
      world_ = *world_size;
      return;
    }
    // Unknown: ranks up to the highest rank seen, or the largest communicator.
    world_ = by_rank_.empty() ? 0 : by_rank_.rbegin()->first + 1;
    for (const auto& [rank, end] : by_rank_) {
      for (const FlightCollective& c : end->state.collectives) {
        if (c.comm_size <= kMaxWorldSize) world_ = std::max(world_, c.comm_size);
      }
    }
  }

  HangReport Run() {
    report_.world_size = world_size_;
    report_.live = live_;
    DescribeRanks();
    GroupByCommunicator();
    for (auto& [hash, input] : comms_) report_.communicators.push_back(DescribeCommunicator(hash, input));
    FindUnclosedCulprits();
    report_.verdict = Verdict();
    if (report_.verdict != RunEndVerdict::kFinished) {
      for (const auto& [rank, reasons] : culprits_.reasons()) {
        Culprit culprit;
        culprit.rank = rank;
        culprit.reasons = reasons;
        if (const RankEnd* end = Find(rank)) culprit.threads = OpenThreadsOf(*end);
        report_.culprits.push_back(std::move(culprit));
      }
    }
    report_.summary = Summary();
    return std::move(report_);
  }

 private:
  const RankEnd* Find(int rank) const {
    auto it = by_rank_.find(rank);
    return it == by_rank_.end() ? nullptr : it->second;
  }
  bool HasState(int rank) const {
    const RankEnd* end = Find(rank);
    return end != nullptr && !end->state.empty();
  }

  void DescribeRanks() {
    std::set<int> ranks;
    for (int rank = 0; rank < world_; ++rank) ranks.insert(rank);
    for (const auto& [rank, end] : by_rank_) ranks.insert(rank);
    for (const int rank : ranks) {
      RankEndInfo info;
      info.rank = rank;
      if (const RankEnd* end = Find(rank)) {
        info.has_file = true;
        info.has_state = !end->state.empty();
        info.host = end->host;
        info.pid = end->pid;
        info.closed_cleanly = end->closed_cleanly;
        info.ended_by = end->ended_by;
        info.as_of_ns = end->state.as_of_ns;
        info.completed_collectives = end->state.completed_collectives;
        info.completed_steps = end->state.completed_steps;
        info.last_progress_ns = end->state.last_progress_ns;
        if (info.has_state) {
          const std::vector<FlightCollective>& entered = end->state.collectives;
          info.in_flight = static_cast<int64_t>(
              std::count_if(entered.begin(), entered.end(), [](const FlightCollective& c) { return c.in_flight(); }));
        }
      }
      report_.ranks.push_back(std::move(info));
    }
  }

  void GroupByCommunicator() {
    for (const auto& [rank, end] : by_rank_) {
      if (end->state.empty()) continue;
      for (const FlightCollective& c : end->state.collectives) {
        CommInput& comm = comms_[c.comm_hash];
        // A communicator larger than the world is damage: its size is then unknown.
        if (c.comm_size > 0 && c.comm_size <= std::min(world_, kMaxWorldSize)) {
          comm.comm_size = std::max(comm.comm_size, c.comm_size);
        }
        RankOnComm& on_comm = comm.ranks[rank];
        on_comm.rank = end;
        if (on_comm.comm_rank < 0 && c.comm_rank >= 0) {
          on_comm.comm_rank = c.comm_rank;
          comm.rank_of_comm_rank.emplace(c.comm_rank, rank);
        }
        const CollectiveOp op = EffectiveOp(c);
        if (IsPointToPoint(op)) {
          on_comm.peer_streams[{op, c.peer}].push_back(&c);
        } else {
          on_comm.collectives.push_back(&c);
        }
      }
    }
  }

  CommunicatorEnd DescribeCommunicator(uint64_t hash, const CommInput& input) {
    CommunicatorEnd comm;
    comm.comm_hash = hash;
    comm.comm = CommHashText(hash);
    comm.comm_size = input.comm_size;

    // Members: every rank when the communicator spans the world; else the ranks with
    // entries, and a row for each communicator rank that no file holds an entry for.
    std::vector<int> member_ranks;
    const bool whole_world = input.comm_size > 0 && input.comm_size == world_;
    if (whole_world) {
      for (const RankEndInfo& info : report_.ranks) member_ranks.push_back(info.rank);
    } else {
      for (const auto& [rank, on_comm] : input.ranks) member_ranks.push_back(rank);
    }
    std::vector<int> unmapped_comm_ranks;
    if (!whole_world) {
      for (int comm_rank = 0; comm_rank < input.comm_size; ++comm_rank) {
        if (!input.rank_of_comm_rank.contains(comm_rank)) unmapped_comm_ranks.push_back(comm_rank);
      }
    }

    std::map<int, Position> positions;
    const FlightCollective* stalled_entry = nullptr;
    for (const auto& [rank, on_comm] : input.ranks) {
      const Position position = PositionOf(on_comm.collectives);
      positions[rank] = position;
      const FlightCollective* oldest = position.oldest_in_flight;
      if (oldest != nullptr && (stalled_entry == nullptr || oldest->sequence < stalled_entry->sequence)) {
        stalled_entry = oldest;
      }
    }

    std::optional<StalledCollective> stalled;
    if (stalled_entry != nullptr) {
      stalled.emplace();
      stalled->sequence = stalled_entry->sequence;
      stalled->no_state_comm_ranks = unmapped_comm_ranks;
    }
    for (const int rank : member_ranks) {
      CommMemberEnd member;
      member.rank = rank;
      auto on_comm = input.ranks.find(rank);
      if (on_comm != input.ranks.end()) member.comm_rank = on_comm->second.comm_rank;
      if (!HasState(rank)) {
        member.state = "no state";
        if (stalled) stalled->no_state_ranks.push_back(rank);
        comm.members.push_back(std::move(member));
        continue;
      }
      const Position position = positions.contains(rank) ? positions[rank] : Position{};
      member.last_entered = position.last_entered;
      member.last_completed = position.last_completed;
      if (position.oldest_in_flight != nullptr) {
        member.in_flight_since_ns = position.oldest_in_flight->start_ns;
        member.waited_ns = WaitedSince(Find(rank)->state, position.oldest_in_flight->start_ns);
      }
      if (!stalled) {
        member.state = "idle";
      } else {
        const FlightCollective* at = on_comm == input.ranks.end()
                                         ? nullptr
                                         : AtSequence(on_comm->second.collectives, stalled->sequence);
        if (at != nullptr && at->in_flight()) {
          member.state = "waiting";
          stalled->waiting.push_back(rank);
        } else if (at != nullptr || (position.last_entered && *position.last_entered > stalled->sequence)) {
          member.state = "passed";
          stalled->passed.push_back(rank);
        } else {
          member.state = "missing";
          stalled->missing.push_back(rank);
          culprits_.Add(rank, "missing");
        }
      }
      comm.members.push_back(std::move(member));
    }
    for (const int comm_rank : unmapped_comm_ranks) {
      CommMemberEnd member;
      member.comm_rank = comm_rank;
      member.state = "no state";
      comm.members.push_back(std::move(member));
    }

    if (stalled) {
      // The collective as the first waiting rank entered it; its wait, each rank on its clock.
      bool first = true;
      for (const int rank : stalled->waiting) {
        const FlightCollective* at = AtSequence(input.ranks.at(rank).collectives, stalled->sequence);
        if (first) {
          stalled->op = CollectiveOpName(EffectiveOp(*at));
          stalled->name = at->name;
          stalled->bytes = at->bytes;
          stalled->root = at->root;
          stalled->since_ns = at->start_ns;
          first = false;
        }
        stalled->since_ns = std::min(stalled->since_ns, at->start_ns);
        stalled->waited_ns = std::max(stalled->waited_ns, WaitedSince(Find(rank)->state, at->start_ns));
      }
    }
    comm.stalled = std::move(stalled);
    comm.mismatches = FindMismatches(input);
    comm.peer_streams = DescribePeerStreams(input);
    return comm;
  }

  std::vector<CollectiveMismatch> FindMismatches(const CommInput& input) {
    // sequence -> signature -> (a record of it, the ranks that entered it so)
    std::map<uint64_t, std::map<Signature, std::pair<const FlightCollective*, std::vector<int>>>> by_sequence;
    for (const auto& [rank, on_comm] : input.ranks) {
      std::set<uint64_t> seen;
      for (const FlightCollective* c : on_comm.collectives) {
        if (!seen.insert(c->sequence).second) continue;  // a rank's own duplicate is not a mismatch
        auto& group = by_sequence[c->sequence][SignatureOf(*c)];
        if (group.first == nullptr) group.first = c;
        group.second.push_back(rank);
      }
    }
    std::vector<CollectiveMismatch> mismatches;
    for (const auto& [sequence, groups] : by_sequence) {
      if (groups.size() < 2) continue;
      CollectiveMismatch mismatch;
      mismatch.sequence = sequence;
      const Signature& first = groups.begin()->first;
      bool op = false, bytes = false, root = false;
      for (const auto& [signature, group] : groups) {
        op = op || signature.op != first.op || signature.unknown_name != first.unknown_name;
        bytes = bytes || signature.bytes != first.bytes;
        root = root || signature.root != first.root;
        CollectiveVersion version;
        version.op = CollectiveOpName(signature.op);
        version.name = group.first->name;
        version.bytes = signature.bytes;
        version.root = signature.root;
        version.ranks = group.second;
        mismatch.versions.push_back(std::move(version));
      }
      if (op) mismatch.fields.push_back("op");
      if (bytes) mismatch.fields.push_back("bytes");
      if (root) mismatch.fields.push_back("root");
      std::stable_sort(mismatch.versions.begin(), mismatch.versions.end(),
                       [](const CollectiveVersion& a, const CollectiveVersion& b) {
                         return a.ranks.size() != b.ranks.size() ? a.ranks.size() > b.ranks.size()
                                                                 : a.ranks.front() < b.ranks.front();
                       });
      // The ranks outside the version most ranks entered; with a tie, every rank.
      const bool tie = mismatch.versions[0].ranks.size() == mismatch.versions[1].ranks.size();
      for (size_t i = tie ? 0 : 1; i < mismatch.versions.size(); ++i) {
        for (const int rank : mismatch.versions[i].ranks) culprits_.Add(rank, "mismatch");
      }
      mismatches.push_back(std::move(mismatch));
    }
    return mismatches;
  }

  std::vector<PeerStream> DescribePeerStreams(const CommInput& input) {
    std::vector<PeerStream> streams;
    for (const auto& [rank, on_comm] : input.ranks) {
      for (const auto& [key, entries] : on_comm.peer_streams) {
        const auto& [op, peer] = key;
        PeerStream stream;
        stream.rank = rank;
        stream.direction = op == CollectiveOp::kSend ? "send" : "recv";
        stream.peer_comm_rank = peer;
        if (auto it = input.rank_of_comm_rank.find(peer); it != input.rank_of_comm_rank.end()) {
          stream.peer_rank = it->second;
        }
        stream.peer_has_state = stream.peer_rank && HasState(*stream.peer_rank);
        const Position position = PositionOf(entries);
        stream.last_entered = position.last_entered;
        stream.last_completed = position.last_completed;
        if (position.oldest_in_flight != nullptr) {
          const FlightCollective& oldest = *position.oldest_in_flight;
          stream.in_flight_sequence = oldest.sequence;
          stream.in_flight_since_ns = oldest.start_ns;
          stream.waited_ns = WaitedSince(on_comm.rank->state, oldest.start_ns);
          // The match: the peer's receives from (or sends to) this rank's communicator rank.
          if (stream.peer_has_state && on_comm.comm_rank >= 0) {
            const RankOnComm& peer_on_comm = input.ranks.at(*stream.peer_rank);
            const CollectiveOp match = op == CollectiveOp::kSend ? CollectiveOp::kRecv : CollectiveOp::kSend;
            auto matching = peer_on_comm.peer_streams.find({match, on_comm.comm_rank});
            if (matching != peer_on_comm.peer_streams.end()) {
              stream.peer_last_entered = PositionOf(matching->second).last_entered;
            }
            stream.unmatched = !stream.peer_last_entered || *stream.peer_last_entered < oldest.sequence;
            if (stream.unmatched) culprits_.Add(*stream.peer_rank, "unmatched p2p");
          }
        }
        streams.push_back(std::move(stream));
      }
    }
    return streams;
  }

  bool AnyoneWaits() const {
    for (const CommunicatorEnd& comm : report_.communicators) {
      if (comm.stalled && !comm.stalled->waiting.empty()) return true;
      for (const PeerStream& stream : comm.peer_streams) {
        if (stream.in_flight_sequence) return true;
      }
    }
    return false;
  }

  // Files ended without being closed; none while the run still records (its open files are
  // live, not killed).
  std::vector<int> UnclosedRanks() const {
    std::vector<int> ranks;
    if (live_) return ranks;
    for (const RankEndInfo& info : report_.ranks) {
      if (info.has_file && !info.closed_cleanly) ranks.push_back(info.rank);
    }
    return ranks;
  }

  // A file that ended without being closed is a culprit (others may wait for it forever),
  // unless every file did: the whole job was killed, which singles no rank out.
  void FindUnclosedCulprits() {
    const std::vector<int> unclosed = UnclosedRanks();
    if (unclosed.empty() || unclosed.size() == by_rank_.size()) return;
    for (const int rank : unclosed) culprits_.Add(rank, "not closed");
  }

  RunEndVerdict Verdict() const {
    bool missing = false, unknown = false, mismatch = false, unmatched = false, in_flight = false;
    for (const CommunicatorEnd& comm : report_.communicators) {
      if (comm.stalled) {
        in_flight = true;
        missing = missing || !comm.stalled->missing.empty();
        unknown = unknown || MembershipUnknown(comm);
      }
      mismatch = mismatch || !comm.mismatches.empty();
      for (const PeerStream& stream : comm.peer_streams) {
        in_flight = in_flight || stream.in_flight_sequence.has_value();
        unmatched = unmatched || stream.unmatched;
        unknown = unknown || (stream.in_flight_sequence && !stream.peer_has_state);
      }
    }
    const bool waits = AnyoneWaits();
    const auto& culprits = culprits_.reasons();
    const bool unclosed_culprit = std::any_of(culprits.begin(), culprits.end(), [](const auto& culprit) {
      return std::find(culprit.second.begin(), culprit.second.end(), "not closed") != culprit.second.end();
    });
    if (missing || unmatched) return RunEndVerdict::kHang;
    if (mismatch) return RunEndVerdict::kMismatch;
    if (waits && (unknown || unclosed_culprit)) return RunEndVerdict::kHang;
    if (!waits && !UnclosedRanks().empty()) return RunEndVerdict::kKilled;
    const bool all_finished = std::all_of(by_rank_.begin(), by_rank_.end(),
                                          [](const auto& entry) { return EndedFinished(*entry.second); });
    if (in_flight || !all_finished) return RunEndVerdict::kUnfinished;
    return RunEndVerdict::kFinished;
  }

  // Whether members of the stalled collective's communicator may be missing unseen: a
  // member without state, or a communicator of unknown size.
  static bool MembershipUnknown(const CommunicatorEnd& comm) {
    return comm.stalled && (!comm.stalled->no_state_ranks.empty() || !comm.stalled->no_state_comm_ranks.empty() ||
                            comm.comm_size == 0);
  }

  // ---- The paragraph ------------------------------------------------------------------

  // Why the state of `ranks` and of communicator ranks `comm_ranks` is unknown.
  std::string UnknownText(const std::vector<int>& ranks, const std::vector<int>& comm_ranks) const {
    std::vector<int> without_file, without_state;
    for (const int rank : ranks) (Find(rank) == nullptr ? without_file : without_state).push_back(rank);
    std::vector<std::string> parts;
    if (!without_file.empty()) parts.push_back(fmt::format("{} left no file", RanksPhrase(without_file)));
    if (!without_state.empty()) {
      parts.push_back(fmt::format("the file of {} holds no in-flight state", RanksPhrase(without_state)));
    }
    if (!comm_ranks.empty()) {
      parts.push_back(fmt::format("no file holds an entry for communicator {}", RanksPhrase(comm_ranks)));
    }
    return fmt::format("{}", fmt::join(parts, "; "));
  }

  static std::string HaveWaited(const std::vector<int>& ranks) {
    return fmt::format("{} {} waited", RanksPhrase(ranks), ranks.size() == 1 ? "has" : "have");
  }

  std::string StalledSentence(const CommunicatorEnd& comm) const {
    const StalledCollective& stalled = *comm.stalled;
    const std::string title = fmt::format("{} #{} on communicator {}", CollectiveTitle(stalled.op, stalled.name),
                                          stalled.sequence, comm.comm);
    const bool unknown = MembershipUnknown(comm);
    std::string sentence;
    if (!stalled.missing.empty()) {
      // Where the missing ranks stopped: "its last entered was #4", or each rank's.
      std::map<std::optional<uint64_t>, std::vector<int>> by_last;
      for (const CommMemberEnd& member : comm.members) {
        if (member.state == "missing") by_last[member.last_entered].push_back(*member.rank);
      }
      std::vector<std::string> lasts;
      for (const auto& [last, ranks] : by_last) {
        const bool one = ranks.size() == 1;
        if (by_last.size() > 1) {
          lasts.push_back(last ? fmt::format("{} last entered #{}", RanksPhrase(ranks), *last)
                               : fmt::format("{} entered none on it", RanksPhrase(ranks)));
        } else {
          lasts.push_back(last ? fmt::format("{} last entered was #{}", one ? "its" : "their", *last)
                               : fmt::format("{} entered none on it", one ? "it" : "they"));
        }
      }
      sentence = fmt::format("{} never entered {} ({})", Capitalized(RanksPhrase(stalled.missing)), title,
                             fmt::join(lasts, "; "));
      if (!stalled.waiting.empty()) {
        sentence += fmt::format("; {} in it for {}", HaveWaited(stalled.waiting), Duration(stalled.waited_ns));
      }
      sentence += ".";
      if (!stalled.passed.empty()) {
        sentence += fmt::format(" {} completed it.", Capitalized(RanksPhrase(stalled.passed)));
      }
    } else {
      sentence =
          fmt::format("{} {} in {}", Capitalized(HaveWaited(stalled.waiting)), Duration(stalled.waited_ns), title);
      if (unknown) {
        sentence += "; whether the others entered it is unknown.";
      } else if (!stalled.passed.empty()) {
        sentence += fmt::format("; {} completed it.", RanksPhrase(stalled.passed));
      } else {
        sentence += "; every member entered it and none completed it.";
      }
    }
    if (!stalled.no_state_ranks.empty() || !stalled.no_state_comm_ranks.empty()) {
      sentence += " " + Capitalized(UnknownText(stalled.no_state_ranks, stalled.no_state_comm_ranks)) + ".";
    }
    if (comm.comm_size == 0) {
      sentence += " The communicator's size is unknown: a member that entered none of its collectives does not show.";
    }
    return sentence;
  }

  static std::string MismatchSentence(const CommunicatorEnd& comm, const CollectiveMismatch& mismatch) {
    std::vector<std::string> versions;
    for (const CollectiveVersion& version : mismatch.versions) {
      versions.push_back(fmt::format("{} entered {}", RanksPhrase(version.ranks), VersionText(version)));
    }
    std::string sentence = fmt::format("Mismatch in {} at #{} on communicator {}: {}.",
                                       fmt::join(mismatch.fields, " and "), mismatch.sequence, comm.comm,
                                       fmt::join(versions, "; "));
    if (comm.stalled && comm.stalled->sequence == mismatch.sequence && !comm.stalled->waiting.empty()) {
      sentence += fmt::format(" {} in it for {}.", Capitalized(HaveWaited(comm.stalled->waiting)),
                              Duration(comm.stalled->waited_ns));
    }
    return sentence;
  }

  static std::string PeerSentence(const CommunicatorEnd& comm, const PeerStream& stream) {
    const bool send = stream.direction == "send";
    const std::string peer = stream.peer_rank ? fmt::format("rank {}", *stream.peer_rank)
                                              : fmt::format("communicator rank {}", stream.peer_comm_rank);
    std::string sentence = fmt::format("Rank {} has waited {} in {} #{} {} {} on communicator {}", stream.rank,
                                       Duration(stream.waited_ns.value_or(0)), send ? "Send" : "Recv",
                                       *stream.in_flight_sequence, send ? "to" : "from", peer, comm.comm);
    const std::string match = send ? "receive" : "send";
    if (stream.unmatched) {
      const std::string so_far =
          stream.peer_last_entered
              ? fmt::format("its last {} {} rank {} was #{}", match, send ? "from" : "to", stream.rank,
                            *stream.peer_last_entered)
              : fmt::format("it entered no {} {} rank {}", match, send ? "from" : "to", stream.rank);
      sentence += fmt::format("; {} never entered the matching {} ({}).", peer, match, so_far);
    } else {
      sentence += fmt::format("; no file holds an entry for {}, so whether it entered the matching {} is unknown.",
                              peer, match);
    }
    return sentence;
  }

  static std::string ThreadsText(const Culprit& culprit) {
    constexpr size_t kThreadsShown = 2;
    std::vector<std::string> parts;
    for (size_t i = 0; i < culprit.threads.size() && i < kThreadsShown; ++i) {
      const OpenThread& thread = culprit.threads[i];
      parts.push_back(fmt::format("{} on thread {} (open {})", fmt::join(thread.ranges, " \u203a "), thread.thread,
                                  Duration(thread.innermost_open_ns)));
    }
    std::string text = fmt::format("{}", fmt::join(parts, " and "));
    if (culprit.threads.size() > kThreadsShown) {
      text += fmt::format(", and ranges on {} other thread(s)", culprit.threads.size() - kThreadsShown);
    }
    return text;
  }

  std::string Summary() const {
    if (report_.verdict == RunEndVerdict::kFinished) {
      return "The run finished: every rank closed its file and nothing was in flight.";
    }
    // The findings, the clearest first: ranks that never entered what others wait in,
    // sends and receives never matched, mismatches, then stalls whose cause is unknown.
    std::vector<std::string> missing, unmatched, mismatches, other_stalls;
    if (live_) {
      missing.push_back("The run was still recording when read: this is what its files had committed, and what "
                        "is in flight may yet complete.");
    }
    bool waits_said = false;
    for (const CommunicatorEnd& comm : report_.communicators) {
      if (comm.stalled) {
        const StalledCollective& stalled = *comm.stalled;
        const bool everyone_in = stalled.missing.empty() && !MembershipUnknown(comm);
        // When every member entered and they disagree, the mismatch sentence says it all.
        if (!stalled.missing.empty()) {
          missing.push_back(StalledSentence(comm));
        } else if (!(everyone_in && !comm.mismatches.empty())) {
          other_stalls.push_back(StalledSentence(comm));
        }
        waits_said = true;
      }
      for (const CollectiveMismatch& mismatch : comm.mismatches) mismatches.push_back(MismatchSentence(comm, mismatch));
      for (const PeerStream& stream : comm.peer_streams) {
        if (!stream.in_flight_sequence || (!stream.unmatched && stream.peer_has_state)) continue;
        unmatched.push_back(PeerSentence(comm, stream));
        waits_said = true;
      }
    }
    std::vector<std::string> sentences;
    size_t left_out = 0;
    for (const auto* group : {&missing, &unmatched, &mismatches, &other_stalls}) {
      const size_t shown = std::min(group->size(), kFindingsPerKind);
      sentences.insert(sentences.end(), group->begin(), group->begin() + static_cast<std::ptrdiff_t>(shown));
      left_out += group->size() - shown;
    }
    if (left_out > 0) {
      sentences.push_back(fmt::format("{} more finding(s) of these kinds are in the report.", left_out));
    }
    const std::vector<int> unclosed = UnclosedRanks();
    if (!unclosed.empty()) {
      sentences.push_back(fmt::format("The {} of {} {} never closed (killed or crashed){}.",
                                      unclosed.size() == 1 ? "file" : "files", RanksPhrase(unclosed),
                                      unclosed.size() == 1 ? "was" : "were",
                                      AnyoneWaits() ? "" : ", and no rank waits on another"));
    }
    size_t culprits_shown = 0;
    for (const Culprit& culprit : report_.culprits) {
      if (!HasState(culprit.rank) || culprits_shown == kCulpritsInSummary) continue;
      ++culprits_shown;
      sentences.push_back(culprit.threads.empty() ? fmt::format("Rank {} had no range open.", culprit.rank)
                                                  : fmt::format("Rank {} was inside {}.", culprit.rank,
                                                                ThreadsText(culprit)));
    }
    if (report_.culprits.size() > culprits_shown && culprits_shown == kCulpritsInSummary) {
      sentences.push_back(fmt::format("What the other {} culprit(s) were inside is in the report.",
                                      report_.culprits.size() - culprits_shown));
    }
    if (report_.verdict == RunEndVerdict::kUnfinished && !waits_said) {
      std::vector<int> in_flight;
      for (const RankEndInfo& info : report_.ranks) {
        if (info.in_flight > 0) in_flight.push_back(info.rank);
      }
      std::string sentence = "No rank waits on another";
      if (!in_flight.empty()) {
        sentence += fmt::format("; {} had operations in flight when the files ended", RanksPhrase(in_flight));
      }
      sentences.push_back(sentence + ".");
    }
    // How files ended when not by exit: "Ranks 0-3 ended by signal 15."
    std::map<std::string, std::vector<int>> ended_by;
    for (const RankEndInfo& info : report_.ranks) {
      if (info.has_file && info.closed_cleanly && !info.ended_by.empty() && info.ended_by != "exit" &&
          info.ended_by != "exec") {
        ended_by[info.ended_by].push_back(info.rank);
      }
    }
    for (const auto& [how, ranks] : ended_by) {
      sentences.push_back(fmt::format("{} ended by {}.", Capitalized(RanksPhrase(ranks)), how));
    }
    // Ranks whose state is unknown, unless a stalled collective already said so.
    std::vector<int> unknown;
    for (const RankEndInfo& info : report_.ranks) {
      if (!info.has_state && !MentionedAsUnknown(info.rank)) unknown.push_back(info.rank);
    }
    if (!unknown.empty()) sentences.push_back(Capitalized(UnknownText(unknown, {})) + ".");
    return fmt::format("{}", fmt::join(sentences, " "));
  }

  bool MentionedAsUnknown(int rank) const {
    for (const CommunicatorEnd& comm : report_.communicators) {
      if (!comm.stalled) continue;
      const std::vector<int>& ranks = comm.stalled->no_state_ranks;
      if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) return true;
    }
    return false;
  }

  std::optional<int> world_size_;
  bool live_ = false;
  int world_ = 0;
  std::map<int, const RankEnd*> by_rank_;
  std::map<uint64_t, CommInput> comms_;
  CulpritList culprits_;
  HangReport report_;
};

}  // namespace

HangReport DiagnoseRunEnd(const std::vector<RankEnd>& ranks, std::optional<int> world_size, bool live) {
  return Diagnosis(ranks, world_size, live).Run();
}

Result<RankEnd> ReadRankEnd(const trace::TraceReader& reader) {
  const trace::RankMeta& meta = reader.meta();
  if (!meta.rank) {
    return InvalidArgument(fmt::format("{}: the file does not say which rank wrote it", Quoted(reader.path())));
  }
  RankEnd end;
  end.rank = *meta.rank;
  end.host = meta.host;
  end.pid = meta.pid;
  end.closed_cleanly = meta.closed_cleanly;
  if (auto ended_by = meta.entries.find("collector.ended_by"); ended_by != meta.entries.end()) {
    end.ended_by = ended_by->second;
  }
  RS_ASSIGN_OR_RETURN(std::vector<trace::Lane> lanes, reader.ReadLanes());
  for (trace::Lane& lane : lanes) end.lane_names.push_back(std::move(lane.name));
  RS_ASSIGN_OR_RETURN(end.state, reader.ReadInFlight());
  return end;
}

Result<std::vector<RankEnd>> ReadRunEnd(const trace::Run& run) {
  std::vector<RankEnd> ends;
  for (const trace::RunFile& file : run.ranks) {
    // Meta, lanes and the in-flight tables only: never the events, however large.
    RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(file.path));
    RS_ASSIGN_OR_RETURN(RankEnd end, ReadRankEnd(*reader));
    ends.push_back(std::move(end));
  }
  return ends;
}

Result<std::optional<HangReport>> DiagnoseRun(const std::filesystem::path& path) {
  RS_ASSIGN_OR_RETURN(trace::Run run, trace::OpenRun(path));
  RS_ASSIGN_OR_RETURN(std::vector<RankEnd> ends, ReadRunEnd(run));
  HangReport report = DiagnoseRunEnd(ends, run.world_size, run.recording);
  if (report.verdict == RunEndVerdict::kFinished) return std::optional<HangReport>();
  return std::optional<HangReport>(std::move(report));
}

}  // namespace rankscope::analyzer
