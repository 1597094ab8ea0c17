// Golden files: a test's whole output compared byte for byte with a file checked in under
// the source tree. RANKSCOPE_UPDATE_GOLDEN=1 rewrites the files instead of comparing (the
// test then goes on, so its exact checks of hand-computed figures still judge the new
// output); review the rewritten files with `git diff` before committing them.
//
// Needs RANKSCOPE_SOURCE_DIR, which every test executable defines.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace rankscope::testing {

inline constexpr const char* kUpdateGoldenVariable = "RANKSCOPE_UPDATE_GOLDEN";

// A golden file's path from its path relative to the source tree ("tests/report/golden/x.txt").
inline std::filesystem::path GoldenPath(std::string_view relative) {
  return std::filesystem::path(RANKSCOPE_SOURCE_DIR) / relative;
}

inline bool UpdatingGoldens() {
  const char* update = std::getenv(kUpdateGoldenVariable);
  return update != nullptr && std::string_view(update) == "1";
}

namespace golden_internal {

inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) {
      lines.push_back(text.substr(begin));
      break;
    }
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// A line as it is shown in the diff: tabs kept, other control bytes (a stray \r) visible.
inline std::string Visible(const std::string& line) {
  std::string out;
  for (char c : line) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 && c != '\t') {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace golden_internal

// The differences between `expected` and `actual` as unified diff hunks (3 lines of
// context, "-" expected, "+" actual), the first `max_lines` lines of them; "" when equal.
// Lines are matched by a longest common subsequence, so a changed line shows as itself and
// not as everything between the first and the last change.
inline std::string GoldenDiff(const std::string& expected, const std::string& actual, size_t max_lines = 40) {
  using golden_internal::SplitLines;
  using golden_internal::Visible;
  if (expected == actual) return "";
  const std::vector<std::string> old_lines = SplitLines(expected);
  const std::vector<std::string> new_lines = SplitLines(actual);
  if (old_lines == new_lines) {
    // Same lines: only the final newline differs.
    return expected.ends_with('\n') ? "(the golden file ends in a newline, the output does not)\n"
                                    : "(the output ends in a newline, the golden file does not)\n";
  }

  // The edit script: ' ' kept, '-' only expected, '+' only actual; with each side's index.
  struct Op {
    char kind;
    size_t old_index, new_index;
  };
  std::vector<Op> ops;
  size_t head = 0;
  while (head < old_lines.size() && head < new_lines.size() && old_lines[head] == new_lines[head]) ++head;
  size_t tail = 0;
  while (tail < old_lines.size() - head && tail < new_lines.size() - head &&
         old_lines[old_lines.size() - 1 - tail] == new_lines[new_lines.size() - 1 - tail]) {
    ++tail;
  }
  for (size_t i = 0; i < head; ++i) ops.push_back({' ', i, i});
  const size_t m = old_lines.size() - head - tail, n = new_lines.size() - head - tail;
  // Longest common suffixes of the middle parts; too large a middle is shown as replaced whole.
  constexpr size_t kMaxCells = size_t{16} << 20;
  std::vector<uint32_t> lcs;
  const bool match_lines = m > 0 && n > 0 && (m + 1) * (n + 1) <= kMaxCells;
  if (match_lines) {
    lcs.assign((m + 1) * (n + 1), 0);
    for (size_t i = m; i-- > 0;) {
      for (size_t j = n; j-- > 0;) {
        lcs[i * (n + 1) + j] = old_lines[head + i] == new_lines[head + j]
                                   ? lcs[(i + 1) * (n + 1) + j + 1] + 1
                                   : std::max(lcs[(i + 1) * (n + 1) + j], lcs[i * (n + 1) + j + 1]);
      }
    }
  }
  size_t i = 0, j = 0;
  while (i < m || j < n) {
    if (match_lines && i < m && j < n && old_lines[head + i] == new_lines[head + j]) {
      ops.push_back({' ', head + i++, head + j++});
    } else if (i < m && (j == n || !match_lines || lcs[(i + 1) * (n + 1) + j] >= lcs[i * (n + 1) + j + 1])) {
      ops.push_back({'-', head + i++, head + j});
    } else {
      ops.push_back({'+', head + i, head + j++});
    }
  }
  for (size_t k = 0; k < tail; ++k) ops.push_back({' ', head + m + k, head + n + k});

  // Hunks: each change with 3 lines of context, changes closer than that merged.
  constexpr size_t kContext = 3;
  std::ostringstream out;
  out << "--- expected (golden)\n+++ actual\n";
  size_t printed = 0, changes_left = 0;
  for (const Op& op : ops) changes_left += op.kind != ' ';
  size_t at = 0;
  while (at < ops.size() && printed < max_lines) {
    while (at < ops.size() && ops[at].kind == ' ') ++at;
    if (at == ops.size()) break;
    const size_t begin = at >= kContext ? at - kContext : 0;
    // One past the hunk's last change: later changes join while the unchanged run before
    // them is short enough that their contexts would touch.
    size_t last = at + 1;
    for (size_t k = last; k < ops.size();) {
      size_t run_end = k;
      while (run_end < ops.size() && ops[run_end].kind == ' ') ++run_end;
      if (run_end == ops.size() || run_end - k > 2 * kContext) break;
      last = run_end + 1;
      k = last;
    }
    const size_t end = std::min(ops.size(), last + kContext);
    size_t old_count = 0, new_count = 0;
    for (size_t k = begin; k < end; ++k) {
      old_count += ops[k].kind != '+';
      new_count += ops[k].kind != '-';
    }
    out << "@@ -" << ops[begin].old_index + 1 << "," << old_count << " +" << ops[begin].new_index + 1 << ","
        << new_count << " @@\n";
    for (size_t k = begin; k < end && printed < max_lines; ++k, ++printed) {
      const Op& op = ops[k];
      if (op.kind != ' ') --changes_left;
      out << op.kind << Visible(op.kind == '+' ? new_lines[op.new_index] : old_lines[op.old_index]) << "\n";
    }
    at = end;
  }
  if (changes_left > 0) out << "... and " << changes_left << " more differing line(s)\n";
  return out.str();
}

// Compares `actual` with the golden file at `path` byte for byte; on a difference the test
// fails showing the first differing lines and how to regenerate. With
// RANKSCOPE_UPDATE_GOLDEN=1 the file is rewritten (created with its folder if missing)
// instead, and the test goes on.
inline void ExpectMatchesGolden(const std::filesystem::path& path, const std::string& actual) {
  std::string expected;
  bool exists = false;
  {
    std::ifstream in(path, std::ios::binary);
    if (in.good()) {
      std::ostringstream text;
      text << in.rdbuf();
      expected = text.str();
      exists = true;
    }
  }
  if (UpdatingGoldens()) {
    if (exists && expected == actual) return;
    std::error_code ignored;
    std::filesystem::create_directories(path.parent_path(), ignored);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << actual;
    out.close();
    if (!out) {
      ADD_FAILURE() << "cannot rewrite the golden file " << path;
      return;
    }
    std::fprintf(stderr, "[ golden   ] rewrote %s: review it with git diff\n", path.string().c_str());
    return;
  }
  if (!exists) {
    ADD_FAILURE() << "missing golden file " << path << "\nrun the test with " << kUpdateGoldenVariable
                  << "=1 to create it, then check it against the arithmetic in the test";
    return;
  }
  if (expected == actual) return;
  ADD_FAILURE() << "the output differs from the golden file " << path << "\n"
                << GoldenDiff(expected, actual) << "if the change is intended, run the test with "
                << kUpdateGoldenVariable << "=1 and review the rewritten file with git diff";
}

}  // namespace rankscope::testing
