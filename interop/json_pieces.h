// Internal to interop/: a JSON trace too large to hold, read in pieces. Chrome-trace JSON is
// one object (or one bare array) whose bulk is a single array of small events: a first pass
// keeps the top level without that array (the skeleton, parsed like a whole file), a second
// hands out the array's elements in chunks, each itself a JSON array of whole elements that
// simdjson parses on its own. Only element boundaries are found here (strings, escapes and
// nesting are tracked, nothing is parsed); simdjson parses every byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "interop/inflate.h"

namespace rankscope::interop::import {

struct TopLevelScan {
  bool bare_array = false;  // the top level is the event array itself
  // The top-level object with `key`'s array emptied ("traceEvents": []), and padding after
  // it; empty for a bare array.
  std::string skeleton;
  bool found = false;       // `key` holds an array at the top level (or the top level is one)
  uint64_t array_begin = 0; // the content offset just past the array's '['
};

// The skeleton holds at most this much: the rest of a trace's top level is small.
inline constexpr size_t kMaxSkeletonBytes = size_t{64} << 20;

// Reads `bytes` to its end. One line starting with `source` when the content is not one JSON
// value (it ends inside it, or more follows), when the top level is neither an object nor an
// array, or when the skeleton passes kMaxSkeletonBytes.
// `piece_bytes`: how much is read from the file at a time (tests make it tiny).
inline constexpr size_t kPieceBytes = size_t{4} << 20;
Result<TopLevelScan> ScanTopLevel(FileBytes& bytes, std::string_view key, std::string_view source,
                                  size_t piece_bytes = kPieceBytes);

// The elements of the array that starts at content offset `array_begin`, in chunks of about
// `chunk_bytes` (more when one element is larger, up to kMaxElementBytes).
class ArrayChunks {
 public:
  static constexpr size_t kMaxElementBytes = size_t{1} << 30;

  ArrayChunks(FileBytes& bytes, uint64_t array_begin, size_t chunk_bytes, std::string source,
              size_t piece_bytes = kPieceBytes);

  // The next chunk as JSON ("[e1,e2,...]"), with at least `padding` readable bytes after it,
  // valid until the next call; an empty view once the array has ended. One line starting
  // with the source when the content ends inside the array or an element is too large.
  Result<std::string_view> Next(size_t padding);
  // The content offset of the current chunk's first byte after its '['.
  uint64_t chunk_offset() const { return chunk_offset_; }

 private:
  FileBytes& bytes_;
  uint64_t array_begin_;
  size_t chunk_bytes_;
  std::string source_;
  size_t piece_bytes_;
  bool started_ = false;
  bool ended_ = false;
  // buffer_[0] is the chunk's '['; buffer_[1, scanned_) has been scanned.
  std::string buffer_;
  size_t scanned_ = 1;
  size_t cut_ = 0;     // the last ',' between elements found (0: none yet)
  size_t handed_ = 0;  // the ',' (now ']') the last chunk ended at; 0: none
  int depth_ = 0;      // within the array: 0 between elements
  bool in_string_ = false;
  bool escaped_ = false;
  uint64_t buffer_offset_ = 0;  // content offset of buffer_[1]
  uint64_t chunk_offset_ = 0;
};

}  // namespace rankscope::interop::import
