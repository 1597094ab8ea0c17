#include "interop/inflate.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "base/file_check.h"
#include "base/text.h"

namespace rankscope::interop::import {
namespace fs = std::filesystem;
namespace {

// FileBytes reads the file this much at a time.
constexpr size_t kPieceBytes = size_t{4} << 20;
// DEFLATE writes at most 258 bytes for every 2 bits it reads: no member inflates to more than
// this many times its size, whatever its trailer claims.
constexpr uint64_t kMaxDeflateRatio = 1032;
// When a guess of the output's size was short, it grows by at least this much.
constexpr size_t kMinGrowth = size_t{1} << 20;

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

bool AllZero(std::string_view bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == 0; });
}

Status TruncatedGzip(const fs::path& file) {
  return Corrupt(fmt::format("{}: truncated gzip file: the compressed data ends early", Quoted(file)));
}

Status SomethingElseAfterGzip(const fs::path& file, uint64_t rest_bytes) {
  return Corrupt(fmt::format("{}: damaged gzip file: {} bytes of something else after the compressed data",
                             Quoted(file), rest_bytes));
}

Status OutOfMemory(const fs::path& file) {
  return Unsupported(fmt::format("{}: out of memory while reading it", Quoted(file)));
}

// Closed on every way out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

struct OpenedFile {
  FileDescriptor fd;
  uint64_t size = 0;
};

Result<OpenedFile> OpenRegularFile(const fs::path& file) {
  RS_RETURN_IF_ERROR(CheckRegularFile(file));
  // O_NONBLOCK: were the path swapped for a FIFO since the check, the open would not block,
  // and fstat below refuses it.
  FileDescriptor fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return IoError(fmt::format("{}: cannot open: {}", Quoted(file), std::strerror(errno)));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return IoError(fmt::format("{}: cannot read its size: {}", Quoted(file), std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) return InvalidArgument(fmt::format("{}: not a regular file", Quoted(file)));
  return OpenedFile{std::move(fd), static_cast<uint64_t>(info.st_size)};
}

// Reads until `size` bytes or the file's end; how many it read.
Result<size_t> ReadUpTo(const fs::path& file, int fd, char* into, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, into + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return IoError(fmt::format("{}: cannot read: {}", Quoted(file), std::strerror(errno)));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

// Why libdeflate refused a member: zlib tells a stream cut short from a damaged one, and
// says what the damage is. Only an error's path runs it; its output is dropped.
Status DiagnoseGzip(const fs::path& file, std::string_view member) {
  struct Inflater {
    z_stream zs{};
    bool ready = false;
    ~Inflater() {
      if (ready) inflateEnd(&zs);
    }
  } inflater;
  z_stream& zs = inflater.zs;
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return InternalError("zlib: inflateInit2 failed");
  inflater.ready = true;
  const auto* next = reinterpret_cast<const Bytef*>(member.data());
  const auto* const end = next + member.size();
  std::array<Bytef, 1 << 16> discarded{};
  for (;;) {
    if (zs.avail_in == 0) {
      zs.next_in = const_cast<Bytef*>(next);
      zs.avail_in = static_cast<uInt>(std::min<size_t>(static_cast<size_t>(end - next), UINT32_MAX));
      next += zs.avail_in;
    }
    zs.next_out = discarded.data();
    zs.avail_out = discarded.size();
    const int rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && next == end) return TruncatedGzip(file);
    if (rc == Z_STREAM_END) {
      return Corrupt(fmt::format("{}: damaged gzip file: libdeflate refused a member zlib reads", Quoted(file)));
    }
    return Corrupt(fmt::format("{}: damaged gzip file: {}", Quoted(file),
                               zs.msg != nullptr ? std::string(zs.msg) : fmt::format("zlib error {}", rc)));
  }
}

// gzip's trailer ends with the member's size modulo 2^32 (ISIZE, little-endian).
uint64_t TrailerSize(std::string_view gzip) {
  if (gzip.size() < 4) return 0;
  const auto* last = reinterpret_cast<const unsigned char*>(gzip.data() + gzip.size() - 4);
  return uint64_t{last[0]} | (uint64_t{last[1]} << 8) | (uint64_t{last[2]} << 16) | (uint64_t{last[3]} << 24);
}

// Every member of `gzip` into `out` (its capacity reused), or false once the output passes
// `budget`.
Result<bool> Gunzip(const fs::path& file, std::string_view gzip, size_t budget, size_t padding, std::string& out) {
  const std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> decompressor(
      libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (decompressor == nullptr) throw std::bad_alloc();
  // The first guess: the last member's trailer, which is the whole output's size for the usual
  // single member (and no zero padding) below 4 GiB. A guess no member could reach is capped.
  const uint64_t guess = std::min(TrailerSize(gzip), gzip.size() * kMaxDeflateRatio);
  size_t limit = static_cast<size_t>(std::min<uint64_t>(budget, std::max<uint64_t>(guess, gzip.size())));
  out.resize(limit + padding);
  size_t length = 0;
  size_t position = 0;
  for (;;) {
    size_t used = 0;
    size_t produced = 0;
    const libdeflate_result rc =
        libdeflate_gzip_decompress_ex(decompressor.get(), gzip.data() + position, gzip.size() - position,
                                      out.data() + length, limit - length, &used, &produced);
    if (rc == LIBDEFLATE_INSUFFICIENT_SPACE) {
      // The member's output passes what is left of the budget: refused without inflating it.
      if (limit >= budget) return false;
      limit = std::min(budget, std::max({limit * 2, length + kMinGrowth, limit + kMinGrowth}));
      out.resize(limit + padding);
      continue;  // libdeflate starts the member over
    }
    if (rc != LIBDEFLATE_SUCCESS) return DiagnoseGzip(file, gzip.substr(position));
    length += produced;
    position += used;
    // Another member may follow; zero bytes (padding) may end the file.
    const std::string_view rest = gzip.substr(position);
    if (AllZero(rest)) break;
    if (!IsGzip(rest)) return SomethingElseAfterGzip(file, rest.size());
  }
  out.resize(length);  // keeps the capacity: `padding` bytes stay after the output
  return true;
}

Result<bool> ReadWholeOrThrow(const fs::path& file, size_t budget, size_t padding, std::string& out,
                              std::string& compressed) {
  RS_ASSIGN_OR_RETURN(OpenedFile opened, OpenRegularFile(file));
  // Compressed or not, a file larger than the budget is larger once unpacked too.
  if (opened.size > budget) return false;
  const auto size = static_cast<size_t>(opened.size);
  // Read into `out`; a gzip file's bytes move to `compressed` and inflate back into `out`.
  out.reserve(size + padding);
  out.resize(size);
  RS_ASSIGN_OR_RETURN(const size_t got, ReadUpTo(file, opened.fd.get(), out.data(), size));
  if (got != size) return IoError(fmt::format("{}: read {} of {} bytes", Quoted(file), got, size));
  if (!IsGzip(out)) return true;
  out.swap(compressed);
  return Gunzip(file, compressed, budget, padding, out);
}

}  // namespace

Result<std::optional<std::string>> ReadWholeIfAtMost(const fs::path& file, size_t budget, size_t padding) {
  std::string out, compressed;
  RS_ASSIGN_OR_RETURN(const bool fits, ReadWholeInto(file, budget, padding, out, compressed));
  if (!fits) return std::optional<std::string>();
  return std::optional<std::string>(std::move(out));
}

Result<bool> ReadWholeInto(const fs::path& file, size_t budget, size_t padding, std::string& out,
                           std::string& compressed) {
  try {
    return ReadWholeOrThrow(file, budget, padding, out, compressed);
  } catch (const std::bad_alloc&) {
    return OutOfMemory(file);
  }
}

// ---- FileBytes -------------------------------------------------------------------------------

struct FileBytes::Inflater {
  z_stream zs{};
  bool ready = false;
  ~Inflater() {
    if (ready) inflateEnd(&zs);
  }
};

FileBytes::FileBytes(fs::path file, int fd, uint64_t stored_bytes, uint64_t max_bytes)
    : file_(std::move(file)), fd_(fd), stored_bytes_(stored_bytes), max_bytes_(max_bytes) {}

FileBytes::~FileBytes() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<FileBytes>> FileBytes::Open(const fs::path& file, uint64_t max_bytes) {
  try {
    RS_ASSIGN_OR_RETURN(OpenedFile opened, OpenRegularFile(file));
    std::unique_ptr<FileBytes> bytes(new FileBytes(file, opened.fd.release(), opened.size, max_bytes));
    bytes->input_ = std::make_unique_for_overwrite<char[]>(kPieceBytes);
    // gzip or not: the first two bytes say.
    while (bytes->input_end_ < 2) {
      RS_ASSIGN_OR_RETURN(const bool more, bytes->Refill());
      if (!more) break;
    }
    bytes->gzip_ = IsGzip(std::string_view(bytes->input_.get(), bytes->input_end_));
    if (!bytes->gzip_ && opened.size > max_bytes) {
      return Unsupported(fmt::format("{}: {} bytes, more than the {} allowed", Quoted(file), opened.size, max_bytes));
    }
    if (bytes->gzip_) {
      bytes->inflater_ = std::make_unique<Inflater>();
      if (inflateInit2(&bytes->inflater_->zs, 15 + 16) != Z_OK) return InternalError("zlib: inflateInit2 failed");
      bytes->inflater_->ready = true;
    }
    return bytes;
  } catch (const std::bad_alloc&) {
    return OutOfMemory(file);
  }
}

Result<bool> FileBytes::Refill() {
  if (at_end_) return false;
  // What is not used yet moves to the front.
  std::memmove(input_.get(), input_.get() + input_begin_, input_end_ - input_begin_);
  input_end_ -= input_begin_;
  input_begin_ = 0;
  if (input_end_ == kPieceBytes) return true;
  RS_ASSIGN_OR_RETURN(const size_t got, ReadUpTo(file_, fd_, input_.get() + input_end_, kPieceBytes - input_end_));
  if (got == 0) {
    at_end_ = true;
    return false;
  }
  input_end_ += got;
  file_offset_ += got;
  return true;
}

Result<size_t> FileBytes::Append(std::string& out, size_t max) {
  if (!failed_.ok()) return failed_;
  const size_t start = out.size();
  Result<size_t> appended = size_t{0};
  try {
    appended = gzip_ ? AppendInflated(out, max) : AppendPlain(out, max);
  } catch (const std::bad_alloc&) {
    appended = OutOfMemory(file_);
  }
  if (!appended.ok()) {
    failed_ = appended.status();
    out.resize(start);
  }
  return appended;
}

Result<size_t> FileBytes::AppendPlain(std::string& out, size_t max) {
  size_t appended = 0;
  while (appended < max) {
    if (input_begin_ == input_end_) {
      RS_ASSIGN_OR_RETURN(const bool more, Refill());
      if (!more) break;
    }
    const size_t take = std::min(max - appended, input_end_ - input_begin_);
    // The file grew since it was opened.
    if (bytes_read_ + take > max_bytes_) return Unsupported(fmt::format("{}: more than {} bytes", Quoted(file_), max_bytes_));
    out.append(input_.get() + input_begin_, take);
    input_begin_ += take;
    appended += take;
    bytes_read_ += take;
  }
  return appended;
}

Result<size_t> FileBytes::AppendInflated(std::string& out, size_t max) {
  z_stream& zs = inflater_->zs;
  const size_t start = out.size();
  size_t appended = 0;
  while (appended < max && !content_ended_) {
    if (input_begin_ == input_end_) RS_RETURN_IF_ERROR(Refill().status());
    const size_t step = std::min(max - appended, kPieceBytes);
    out.resize(start + appended + step);
    zs.next_in = reinterpret_cast<Bytef*>(input_.get() + input_begin_);
    zs.avail_in = static_cast<uInt>(input_end_ - input_begin_);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + start + appended);
    zs.avail_out = static_cast<uInt>(step);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    input_begin_ = input_end_ - zs.avail_in;
    const size_t produced = step - zs.avail_out;
    appended += produced;
    bytes_read_ += produced;
    out.resize(start + appended);
    // Checked at every step: a gzip bomb is refused once it passes the limit, not inflated whole.
    if (bytes_read_ > max_bytes_) {
      return Unsupported(fmt::format("{}: more than {} bytes once unpacked", Quoted(file_), max_bytes_));
    }
    if (rc == Z_OK) continue;
    if (rc == Z_STREAM_END) {
      RS_ASSIGN_OR_RETURN(const bool another, NextMember());
      if (another) {
        inflateReset(&zs);
      } else {
        content_ended_ = true;
      }
      continue;
    }
    if (rc == Z_BUF_ERROR && input_begin_ == input_end_ && at_end_) return TruncatedGzip(file_);
    return Corrupt(fmt::format("{}: damaged gzip file: {}", Quoted(file_),
                               zs.msg != nullptr ? std::string(zs.msg) : fmt::format("zlib error {}", rc)));
  }
  return appended;
}

Result<bool> FileBytes::NextMember() {
  while (input_end_ - input_begin_ < 2) {
    RS_ASSIGN_OR_RETURN(const bool more, Refill());
    if (!more) break;
  }
  if (IsGzip(std::string_view(input_.get() + input_begin_, input_end_ - input_begin_))) return true;
  // Only zero bytes may follow the last member.
  const uint64_t rest_offset = file_offset_ - (input_end_ - input_begin_);
  for (;;) {
    if (!AllZero(std::string_view(input_.get() + input_begin_, input_end_ - input_begin_))) {
      return SomethingElseAfterGzip(file_, std::max(stored_bytes_, file_offset_) - rest_offset);
    }
    input_begin_ = input_end_;
    RS_ASSIGN_OR_RETURN(const bool more, Refill());
    if (!more) return false;
  }
}

}  // namespace rankscope::interop::import
