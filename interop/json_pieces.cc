#include "interop/json_pieces.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "interop/import_internal.h"

namespace rankscope::interop::import {
namespace {

// Inside a string at p[i] (after its opening quote, or after an escaped character): the
// index just past its closing quote, or n when the string goes on past the buffer. An escape
// whose backslash ends the buffer sets `escaped`: the buffer's next byte is its character.
size_t SkipString(const char* p, size_t i, size_t n, bool& in_string, bool& escaped) {
  while (i < n) {
    if (escaped) {
      escaped = false;
      ++i;
      continue;
    }
    const auto* quote = static_cast<const char*>(std::memchr(p + i, '"', n - i));
    const size_t end = quote != nullptr ? static_cast<size_t>(quote - p) : n;
    const auto* backslash = static_cast<const char*>(std::memchr(p + i, '\\', end - i));
    if (backslash != nullptr) {
      i = static_cast<size_t>(backslash - p) + 1;
      escaped = true;
      continue;
    }
    if (quote == nullptr) return n;
    in_string = false;
    return end + 1;
  }
  return n;
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

Result<TopLevelScan> ScanTopLevel(FileBytes& bytes, std::string_view key, std::string_view source,
                                  size_t piece_bytes) {
  enum class Phase { kBefore, kObject, kAfter };
  TopLevelScan scan;
  Phase phase = Phase::kBefore;
  int depth = 0;
  bool in_string = false, escaped = false;
  bool expect_key = false, in_key = false, key_matched = false, value_next = false;
  bool skipping = false;  // inside the key's array
  int skip_depth = 0;
  std::string current_key;
  std::string buffer;
  uint64_t offset = 0;  // content offset of buffer[0]
  for (;;) {
    buffer.clear();
    RS_ASSIGN_OR_RETURN(const size_t got, bytes.Append(buffer, piece_bytes));
    if (got == 0) break;
    const char* p = buffer.data();
    const size_t n = buffer.size();
    size_t i = 0;
    size_t copy_from = 0;
    while (i < n) {
      if (in_string) {
        const size_t from = i;
        i = SkipString(p, i, n, in_string, escaped);
        if (in_key) {
          current_key.append(p + from, (in_string ? i : i - 1) - from);
          if (!in_string) in_key = false;
        }
        continue;
      }
      const char c = p[i];
      if (phase == Phase::kBefore) {
        // White space, and a byte-order mark at the very start, which is not JSON.
        const uint64_t at = offset + i;
        if (IsSpace(c) || (at < kUtf8ByteOrderMark.size() && c == kUtf8ByteOrderMark[at])) {
          copy_from = ++i;
          continue;
        }
        if (c == '[') {
          scan.bare_array = true;
          scan.found = true;
          scan.array_begin = offset + i + 1;
          return scan;
        }
        if (c != '{') {
          return Corrupt(fmt::format("{}: the top level is not a JSON object or array: not a PyTorch profiler trace",
                                     source));
        }
        phase = Phase::kObject;
        depth = 1;
        expect_key = true;
        ++i;
        continue;
      }
      if (phase == Phase::kAfter) {
        if (!IsSpace(c) && c != '\0') {
          return Corrupt(fmt::format("{}: malformed JSON at byte {}: more after the top-level value", source,
                                     offset + i));
        }
        ++i;
        continue;
      }
      switch (c) {
        case '"':
          in_string = true;
          if (depth == 1 && expect_key && !skipping) {
            in_key = true;
            expect_key = false;
            current_key.clear();
          }
          break;
        case ':':
          if (depth == 1 && !skipping) {
            key_matched = current_key == key;
            value_next = true;
          }
          break;
        case '{':
        case '[':
          if (depth == 1 && value_next && key_matched && c == '[' && !skipping) {
            skipping = true;
            skip_depth = depth + 1;
            scan.found = true;
            scan.array_begin = offset + i + 1;
            scan.skeleton.append(p + copy_from, i + 1 - copy_from);
          }
          ++depth;
          value_next = false;
          break;
        case '}':
        case ']':
          if (skipping && depth == skip_depth && c == ']') {
            skipping = false;
            copy_from = i;
          }
          --depth;
          if (depth == 0) phase = Phase::kAfter;
          break;
        case ',':
          if (depth == 1 && !skipping) {
            expect_key = true;
            value_next = false;
          }
          break;
        default:
          if (!IsSpace(c)) value_next = false;
          break;
      }
      ++i;
      if (phase == Phase::kAfter) {
        scan.skeleton.append(p + copy_from, i - copy_from);
        copy_from = n;
      }
    }
    if (!skipping && copy_from < n) scan.skeleton.append(p + copy_from, n - copy_from);
    if (scan.skeleton.size() > kMaxSkeletonBytes) {
      return Unsupported(fmt::format("{}: more than {} bytes of JSON outside traceEvents: too large to read", source,
                                     kMaxSkeletonBytes));
    }
    offset += n;
  }
  if (phase == Phase::kBefore) return Corrupt(fmt::format("{}: empty file: no JSON in it", source));
  if (phase != Phase::kAfter) {
    return Corrupt(fmt::format("{}: malformed JSON: the file ends inside its top-level value (truncated?)", source));
  }
  scan.skeleton.reserve(scan.skeleton.size() + 64);
  return scan;
}

ArrayChunks::ArrayChunks(FileBytes& bytes, uint64_t array_begin, size_t chunk_bytes, std::string source,
                         size_t piece_bytes)
    : bytes_(bytes),
      array_begin_(array_begin),
      chunk_bytes_(chunk_bytes),
      source_(std::move(source)),
      piece_bytes_(piece_bytes) {}

Result<std::string_view> ArrayChunks::Next(size_t padding) {
  if (ended_) return std::string_view();
  if (!started_) {
    started_ = true;
    // Skip to the array: the content before it was read by ScanTopLevel.
    for (uint64_t skipped = 0; skipped < array_begin_;) {
      buffer_.clear();
      RS_ASSIGN_OR_RETURN(const size_t got,
                          bytes_.Append(buffer_, static_cast<size_t>(std::min<uint64_t>(piece_bytes_, array_begin_ - skipped))));
      if (got == 0) return Corrupt(fmt::format("{}: the file ended before its event array", source_));
      skipped += got;
    }
    buffer_.assign("[");
    scanned_ = 1;
    buffer_offset_ = array_begin_;
  }
  if (handed_ > 0) {
    // The last chunk ended at a ',' made ']': what follows it starts this one.
    const size_t rest = buffer_.size() - (handed_ + 1);
    std::memmove(buffer_.data() + 1, buffer_.data() + handed_ + 1, rest);
    buffer_.resize(1 + rest);
    buffer_offset_ += handed_;
    scanned_ -= handed_;
    cut_ = 0;
    handed_ = 0;
  }
  chunk_offset_ = buffer_offset_;
  const auto hand_out = [&](size_t last) -> std::string_view {
    if (buffer_.capacity() < last + 1 + padding) buffer_.reserve(last + 1 + padding);
    buffer_[last] = ']';
    return std::string_view(buffer_.data(), last + 1);
  };
  for (;;) {
    const char* p = buffer_.data();
    const size_t n = buffer_.size();
    size_t i = scanned_;
    while (i < n) {
      if (in_string_) {
        i = SkipString(p, i, n, in_string_, escaped_);
        continue;
      }
      switch (p[i]) {
        case '"': in_string_ = true; break;
        case '{':
        case '[': ++depth_; break;
        case '}': --depth_; break;
        case ']':
          if (depth_ == 0) {
            ended_ = true;
            return hand_out(i);
          }
          --depth_;
          break;
        case ',':
          if (depth_ == 0) cut_ = i;
          break;
        default: break;
      }
      ++i;
    }
    scanned_ = n;
    if (cut_ > 0 && n - 1 >= chunk_bytes_) {
      handed_ = cut_;
      return hand_out(cut_);
    }
    if (n > chunk_bytes_ + kMaxElementBytes) {
      return Unsupported(fmt::format("{}: an event of more than {} bytes at byte {}: too large to read", source_,
                                     kMaxElementBytes, buffer_offset_ + (cut_ > 0 ? cut_ : 0)));
    }
    RS_ASSIGN_OR_RETURN(const size_t got, bytes_.Append(buffer_, piece_bytes_));
    if (got == 0) {
      return Corrupt(fmt::format("{}: malformed JSON: the file ends inside traceEvents (truncated?)", source_));
    }
  }
}

}  // namespace rankscope::interop::import
