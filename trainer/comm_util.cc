#include "trainer/comm_util.h"

#include <signal.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace rankscope::trainer::comm {

std::string FormatDuration(std::chrono::milliseconds duration) {
  const long long ms = duration.count();
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  return fmt::format("{:g}s", static_cast<double>(ms) / 1000.0);
}

std::string RankList(const std::vector<int>& ranks) {
  constexpr size_t kMaxNamed = 16;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kMaxNamed; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kMaxNamed) text += fmt::format(" and {} more", ranks.size() - kMaxNamed);
  return text;
}

std::string CleanGlooMessage(std::string_view what) {
  std::string text;
  text.reserve(what.size());
  for (char c : what) text += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  std::string_view rest(text);
  // Gloo stacks "[file:line] " prefixes, sometimes twice, and "[enforce fail at ...] ".
  while (true) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty() || rest.front() != '[') break;
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) break;
    rest.remove_prefix(close + 1);
  }
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  return rest.empty() ? std::string(what.empty() ? "unknown error" : what) : std::string(rest);
}

void IgnoreSigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

uint64_t Fnv1a64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;  // the FNV offset basis
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;  // the FNV prime
  }
  return hash;
}

Result<int> RankInGroup(const std::vector<int>& members, int world_rank, int world_size) {
  int index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= world_size || (i > 0 && members[i] <= members[i - 1])) {
      return InvalidArgument(fmt::format("a group's ranks must be distinct ranks of the run, ascending: {}",
                                         fmt::join(members, ", ")));
    }
    if (members[i] == world_rank) index = static_cast<int>(i);
  }
  if (index < 0) {
    return InvalidArgument(fmt::format("rank {} is not in the group of ranks {}", world_rank, fmt::join(members, ", ")));
  }
  return index;
}

std::string GroupSuffix(const std::vector<int>& members) {
  return fmt::format("-r{}", fmt::join(members, "-"));
}

std::vector<char> ToBytes(std::string_view text) { return {text.begin(), text.end()}; }

std::string FromBytes(const std::vector<char>& bytes) { return {bytes.begin(), bytes.end()}; }

Status ExplainFailure(const CollectiveFailure& f) {
  const std::string head = f.timed_out ? fmt::format("{} timed out after {}", f.operation, FormatDuration(f.timeout))
                                       : fmt::format("{} failed", f.operation);
  std::string message;
  if (f.missing.empty()) {
    message = fmt::format("{}: {}{}", head, f.detail, f.suffix);
  } else {
    const char* what = f.timed_out ? "did not respond" : (f.missing.size() == 1 ? "is gone" : "are gone");
    message = fmt::format("{}: {} {} ({}){}", head, RankList(f.missing), what, f.detail, f.suffix);
  }
  return f.timed_out ? Unavailable(message) : IoError(message);
}

}  // namespace rankscope::trainer::comm
