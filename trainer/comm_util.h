// Small pieces shared by the rendezvous, the Gloo and the NCCL groups: how durations, rank
// lists and Gloo's exception texts appear in one-line error messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rankscope::trainer::comm {

// "30s", "1.5s", "250ms": a timeout the way a user would write it.
std::string FormatDuration(std::chrono::milliseconds duration);

// "rank 1" or "ranks 1, 3"; a long list is cut ("ranks 0, 1, ... and 40 more").
std::string RankList(const std::vector<int>& ranks);

// Gloo's exception text on one line, without its "[file:line]" and "[enforce fail at ...]"
// prefixes, which say nothing to a user.
std::string CleanGlooMessage(std::string_view what);

// A write to a socket whose peer died raises SIGPIPE, which by default ends the process
// before the write can fail with EPIPE; a dead rank would take its survivors with it.
// Sets SIGPIPE to "ignore" (as Python does for every program) unless the program installed
// a handler of its own. Process-wide; called before any socket is made.
void IgnoreSigpipe();

// The one-line error of a failed collective, shared by the Gloo and NCCL groups:
// "all-reduce failed: rank 1 is gone (detail)", "... timed out after 30s: rank 2 did not
// respond (detail)", or, with nobody missing, "all-reduce failed: detail". `suffix` is
// appended as is (e.g. "; communicator aborted"). Unavailable for a timeout, else IoError.
struct CollectiveFailure {
  std::string_view operation;
  bool timed_out = false;
  std::chrono::milliseconds timeout{};
  std::vector<int> missing;
  std::string detail;
  std::string_view suffix;
};
Status ExplainFailure(const CollectiveFailure& failure);

// FNV-1a, 64 bits: a communicator's id from a name every rank of it shares.
uint64_t Fnv1a64(std::string_view text);

// A group of some ranks (`members`: world ranks, ascending, distinct): this rank's index in
// it, or an error when it is not a member or the list is malformed.
Result<int> RankInGroup(const std::vector<int>& members, int world_rank, int world_size);
// The group's part of its key namespace and communicator name: "-r1-3" for ranks 1 and 3.
std::string GroupSuffix(const std::vector<int>& members);

std::vector<char> ToBytes(std::string_view text);
std::string FromBytes(const std::vector<char>& bytes);

}  // namespace rankscope::trainer::comm
