// Text from files or users, made safe to put in a one-line message.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace rankscope {

// `text` with control and non-ASCII bytes escaped as \xNN, cut to `max_chars` characters
// of input (then "..." follows), in single quotes.
inline std::string Printable(std::string_view text, size_t max_chars = 64) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < max_chars; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  out += text.size() > max_chars ? "'..." : "'";
  return out;
}

// A path in a message: Printable, with room for long paths.
inline std::string Quoted(const std::filesystem::path& path) { return Printable(path.string(), 200); }

}  // namespace rankscope
