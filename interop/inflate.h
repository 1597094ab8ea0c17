// Internal to interop/ (and its tests and benchmarks): a trace file's bytes, gunzipped when
// they are gzip, either whole (libdeflate, the fastest inflate Debian ships) or piece by
// piece for files too large to hold (zlib's streaming inflate: libdeflate cannot stream).
// Both read every gzip member, allow zero bytes after the last one, and never hold more than
// their limit of output: a small file that inflates to gigabytes is refused, not inflated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"

namespace rankscope::interop::import {

// The file's bytes (gunzipped when they start with gzip's magic, every member) with `padding`
// bytes of spare capacity after them, or nullopt when they are more than `budget` bytes, as
// stored or once unpacked; finding that out holds no more than about `budget` bytes of output.
// One line naming the file on failure: missing, not a regular file, unreadable, a truncated
// or damaged gzip stream, something other than zero bytes after the last member, or out of
// memory.
Result<std::optional<std::string>> ReadWholeIfAtMost(const std::filesystem::path& file, size_t budget,
                                                     size_t padding);

// The same into `out`, whose capacity is reused (a reader of many files faults fresh pages
// in once, not per file); `compressed` holds a gzip file's bytes meanwhile. False when the
// content is more than `budget` bytes (`out` then holds no more than about that).
Result<bool> ReadWholeInto(const std::filesystem::path& file, size_t budget, size_t padding, std::string& out,
                           std::string& compressed);

// A file's (gunzipped) bytes in pieces, for files too large to hold whole: the file is read a
// few MiB at a time and gzip inflated as it goes, so memory stays bounded whatever its size.
class FileBytes {
 public:
  // Checks that `file` is a regular file and opens it; refuses, in Append, content of more
  // than `max_bytes` once unpacked (a plain file larger than that is refused here).
  static Result<std::unique_ptr<FileBytes>> Open(const std::filesystem::path& file, uint64_t max_bytes);
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  // Appends up to `max` more bytes of the content to `out` (fewer only at the end) and says
  // how many: 0 only once the content has ended (or when `max` is 0). After an error, every
  // call returns that error.
  Result<size_t> Append(std::string& out, size_t max);

  bool gzip() const { return gzip_; }
  // The file's size on disk.
  uint64_t stored_bytes() const { return stored_bytes_; }
  // Content handed out so far (unpacked).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  struct Inflater;
  FileBytes(std::filesystem::path file, int fd, uint64_t stored_bytes, uint64_t max_bytes);

  // Reads the next piece of the file into input_ once what is there has been used; false at
  // the file's end.
  Result<bool> Refill();
  Result<size_t> AppendPlain(std::string& out, size_t max);
  Result<size_t> AppendInflated(std::string& out, size_t max);
  // After a gzip member: true when another member follows, false when only zero bytes (or
  // nothing) are left; an error for anything else.
  Result<bool> NextMember();

  std::filesystem::path file_;
  int fd_ = -1;
  uint64_t stored_bytes_ = 0;
  uint64_t max_bytes_ = 0;
  uint64_t bytes_read_ = 0;
  uint64_t file_offset_ = 0;  // bytes read from the file into input_ so far
  bool gzip_ = false;
  bool at_end_ = false;       // the file has been read to its end
  bool content_ended_ = false;
  std::unique_ptr<char[]> input_;
  size_t input_begin_ = 0;    // input_[input_begin_, input_end_) is not used yet
  size_t input_end_ = 0;
  std::unique_ptr<Inflater> inflater_;
  Status failed_;
};

}  // namespace rankscope::interop::import
