// How fast a .json.gz trace is inflated: zlib 64 KiB at a time into one string (how
// ReadMaybeGzip read before libdeflate), ReadWholeIfAtMost (libdeflate, the file whole) and
// FileBytes (zlib streaming, 4 MiB pieces handed out and dropped), interleaved, each run
// reading the file from the page cache.
//   inflate_bench FILE.gz [--runs N]   MB/s of output per way, medians and libdeflate / zlib
//   inflate_bench --smoke              once each on a small file made here, no timing
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "interop/inflate.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using rankscope::interop::import::FileBytes;
using rankscope::interop::import::ReadWholeIfAtMost;

constexpr size_t kLimit = size_t{16} << 30;

// The file gunzipped the way ReadMaybeGzip did before libdeflate: read whole, inflated 64 KiB
// at a time, every member; nullopt (and a line on stderr) when it fails.
std::optional<std::string> ZlibChunked(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string raw(static_cast<size_t>(fs::file_size(file)), '\0');
  if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size()))) return std::nullopt;
  std::string out;
  out.reserve(raw.size() * 4);
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return std::nullopt;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  std::array<char, 1 << 16> chunk{};
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk.data());
    zs.avail_out = chunk.size();
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.append(chunk.data(), chunk.size() - zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0 || zs.next_in[0] == 0) break;
      inflateReset(&zs);
      continue;
    }
    if (rc != Z_OK) {
      std::fprintf(stderr, "inflate_bench: zlib error %d on %s\n", rc, file.c_str());
      inflateEnd(&zs);
      return std::nullopt;
    }
  }
  inflateEnd(&zs);
  return out;
}

std::optional<std::string> Libdeflate(const fs::path& file) {
  auto read = ReadWholeIfAtMost(file, kLimit, 64);
  if (!read.ok() || !read->has_value()) {
    std::fprintf(stderr, "inflate_bench: %s\n", read.ok() ? "more than the limit" : read.status().message().c_str());
    return std::nullopt;
  }
  return std::move(**read);
}

// Streams the file through one reused 4 MiB buffer; how many bytes it handed out.
std::optional<uint64_t> Streamed(const fs::path& file) {
  auto bytes = FileBytes::Open(file, kLimit);
  if (!bytes.ok()) {
    std::fprintf(stderr, "inflate_bench: %s\n", bytes.status().message().c_str());
    return std::nullopt;
  }
  std::string piece;
  piece.reserve(size_t{4} << 20);
  for (;;) {
    piece.clear();
    auto appended = (*bytes)->Append(piece, size_t{4} << 20);
    if (!appended.ok()) {
      std::fprintf(stderr, "inflate_bench: %s\n", appended.status().message().c_str());
      return std::nullopt;
    }
    if (*appended == 0) return (*bytes)->bytes_read();
  }
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int Run(const fs::path& file, int runs, bool smoke) {
  std::vector<double> zlib_rates, libdeflate_rates, stream_rates;
  for (int run = 0; run < runs; ++run) {
    // Alternating who goes first, so neither always finds a warmer cache.
    for (int turn = 0; turn < 3; ++turn) {
      const int way = (turn + run) % 3;
      const auto start = Clock::now();
      uint64_t bytes = 0;
      std::optional<std::string> whole;
      if (way == 2) {
        const std::optional<uint64_t> streamed = Streamed(file);
        if (!streamed) return 1;
        bytes = *streamed;
      } else {
        whole = way == 0 ? ZlibChunked(file) : Libdeflate(file);
        if (!whole) return 1;
        bytes = whole->size();
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      const double rate = static_cast<double>(bytes) / 1e6 / seconds;
      const char* name = way == 0 ? "zlib 64 KiB" : way == 1 ? "libdeflate" : "FileBytes";
      (way == 0 ? zlib_rates : way == 1 ? libdeflate_rates : stream_rates).push_back(rate);
      std::printf("run %d %-11s: %.3f s, %.1f MB out, %.1f MB/s\n", run, name, seconds, static_cast<double>(bytes) / 1e6,
                  rate);
      std::fflush(stdout);
    }
  }
  // The three ways must agree on the content, not only on its size.
  const std::optional<std::string> by_zlib = ZlibChunked(file);
  const std::optional<std::string> by_libdeflate = Libdeflate(file);
  const std::optional<uint64_t> by_stream = Streamed(file);
  if (!by_zlib || !by_libdeflate || !by_stream || *by_zlib != *by_libdeflate || *by_stream != by_zlib->size()) {
    std::fprintf(stderr, "inflate_bench: the ways disagree on %s\n", file.c_str());
    return 1;
  }
  const double zlib = Median(zlib_rates), libdeflate = Median(libdeflate_rates), stream = Median(stream_rates);
  std::printf("median of %d: zlib 64 KiB %.1f MB/s, libdeflate %.1f MB/s, FileBytes %.1f MB/s; "
              "libdeflate / zlib %.2f%s\n",
              runs, zlib, libdeflate, stream, libdeflate / zlib, smoke ? " (smoke: no timing)" : "");
  return 0;
}

// A small gzip file of trace-like text, two members.
bool WriteSmokeFile(const fs::path& file) {
  std::string text;
  for (int i = 0; text.size() < (size_t{1} << 20); ++i) {
    text += fmt::format("{{\"ph\": \"X\", \"name\": \"kernel_{}\", \"ts\": {}, \"dur\": {}}},\n", i % 13, i * 7, i % 50);
  }
  std::string gzip;
  for (int member = 0; member < 2; ++member) {
    z_stream zs{};
    if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
    std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(text.data());
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) return false;
    gzip += out;
  }
  std::ofstream out(file, std::ios::binary);
  out << gzip;
  return out.good();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--smoke") == 0) {
    const fs::path file = fs::temp_directory_path() / fmt::format("inflate_bench-{}.json.gz", ::getpid());
    const int rc = WriteSmokeFile(file) ? Run(file, 1, true) : 1;
    std::error_code ignored;
    fs::remove(file, ignored);
    return rc;
  }
  if (argc != 2 && !(argc == 4 && std::strcmp(argv[2], "--runs") == 0)) {
    std::fprintf(stderr, "usage: inflate_bench FILE.gz [--runs N] | --smoke\n");
    return 2;
  }
  const int runs = argc == 4 ? std::atoi(argv[3]) : 5;
  if (runs < 1) {
    std::fprintf(stderr, "inflate_bench: --runs takes a positive number\n");
    return 2;
  }
  return Run(argv[1], runs, false);
}
