// rankscope's own lines on stderr: "rankscope: error: ...", "rankscope: note: ...". Each
// message is kept to one line, so scripts can grep for it and users see it whole. Written
// with fputs, which reports a failed write (e.g. a closed pipe) instead of throwing as
// fmt::print does: losing a message must not lose the command's exit code.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace rankscope::cli {

// `text` with line breaks turned into "; " and trailing blanks dropped.
inline std::string OneLine(std::string_view text) {
  std::string line;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      if (!line.empty() && line.back() != ' ') line += "; ";
    } else {
      line += c;
    }
  }
  while (!line.empty() && (line.back() == ' ' || line.back() == ';')) line.pop_back();
  return line;
}

// Writes `text` as it is and flushes, so that it comes before the command's own output.
inline void PrintText(std::FILE* out, const std::string& text) {
  std::fputs(text.c_str(), out);
  std::fflush(out);
}

inline void PrintError(std::FILE* out, std::string_view message) {
  PrintText(out, fmt::format("rankscope: error: {}\n", OneLine(message)));
}

inline void PrintNote(std::FILE* out, std::string_view message) {
  PrintText(out, fmt::format("rankscope: note: {}\n", OneLine(message)));
}

inline void PrintInfo(std::FILE* out, std::string_view message) {
  PrintText(out, fmt::format("rankscope: {}\n", OneLine(message)));
}

}  // namespace rankscope::cli
