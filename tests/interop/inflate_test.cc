// A file's bytes, gunzipped: whole (ReadWholeIfAtMost, libdeflate) and in pieces (FileBytes,
// zlib's streaming inflate), on gzip files made here with zlib: every member read, zero
// padding allowed, damage and truncation and garbage refused with one line naming the file,
// and no more output held than the budget, whatever the file claims.
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "interop/inflate.h"
#include "tests/interop/import_test_util.h"
#include "tests/temp_dir.h"

namespace rankscope::interop::import {
namespace {

namespace fs = std::filesystem;
using rankscope::testing::TempDir;

constexpr size_t kPadding = 64;
constexpr size_t kMiB = size_t{1} << 20;

// `text` as one gzip member, at zlib's default level unless told.
std::string Gzip(const std::string& text, int level = 6) { return interop::testing::Gzip(text, level); }

void AppendLittleEndian32(std::string& out, uint32_t value) {
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>((value >> shift) & 0xff));
}

// One gzip member of `mebibytes` MiB of zero bytes, about 1 KiB per MiB: the same full-flushed
// DEFLATE segment repeated (each starts afresh), its CRC combined rather than computed.
std::string ZeroBomb(size_t mebibytes) {
  const std::string zeros(kMiB, '\0');
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string segment(deflateBound(&zs, kMiB) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
  zs.avail_in = static_cast<uInt>(zeros.size());
  zs.next_out = reinterpret_cast<Bytef*>(segment.data());
  zs.avail_out = static_cast<uInt>(segment.size());
  EXPECT_EQ(deflate(&zs, Z_FULL_FLUSH), Z_OK);
  EXPECT_EQ(zs.avail_in, 0u);
  segment.resize(zs.total_out);
  std::string last_block(64, '\0');
  zs.next_out = reinterpret_cast<Bytef*>(last_block.data());
  zs.avail_out = static_cast<uInt>(last_block.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  last_block.resize(zs.total_out - segment.size());
  deflateEnd(&zs);

  const uLong crc_of_one = crc32(0, reinterpret_cast<const Bytef*>(zeros.data()), static_cast<uInt>(zeros.size()));
  uLong crc = crc_of_one;
  for (size_t i = 1; i < mebibytes; ++i) crc = crc32_combine(crc, crc_of_one, static_cast<z_off_t>(kMiB));

  std::string bomb("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  bomb.reserve(bomb.size() + segment.size() * mebibytes + 16);
  for (size_t i = 0; i < mebibytes; ++i) bomb += segment;
  bomb += last_block;
  AppendLittleEndian32(bomb, static_cast<uint32_t>(crc));
  AppendLittleEndian32(bomb, static_cast<uint32_t>(mebibytes * kMiB));
  return bomb;
}

// Lines of a trace-like text, the same every run.
std::string SampleText(size_t bytes) {
  std::mt19937 random(24);
  std::string text;
  text.reserve(bytes + 128);
  while (text.size() < bytes) {
    text += "{\"ph\": \"X\", \"name\": \"kernel_" + std::to_string(random() % 97) +
            "\", \"ts\": " + std::to_string(random()) + ", \"dur\": " + std::to_string(random() % 5000) + "},\n";
  }
  text.resize(bytes);
  return text;
}

fs::path Write(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const fs::path path = dir / name;
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  EXPECT_TRUE(out.good()) << path;
  return path;
}

// ReadWholeIfAtMost that must succeed and fit: its bytes, with the padding checked.
std::string Whole(const fs::path& file, size_t budget = size_t{1} << 32) {
  Result<std::optional<std::string>> read = ReadWholeIfAtMost(file, budget, kPadding);
  EXPECT_TRUE(read.ok()) << read.status().message();
  if (!read.ok()) return "(failed)";
  EXPECT_TRUE(read->has_value()) << file << " is more than " << budget << " bytes";
  if (!read->has_value()) return "(over budget)";
  EXPECT_GE((*read)->capacity(), (*read)->size() + kPadding);
  return std::move(**read);
}

// Everything FileBytes hands out, `max` bytes a call.
std::string InPieces(const fs::path& file, size_t max, uint64_t max_bytes = uint64_t{1} << 40) {
  Result<std::unique_ptr<FileBytes>> bytes = FileBytes::Open(file, max_bytes);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  if (!bytes.ok()) return "(failed)";
  std::string all;
  for (;;) {
    Result<size_t> appended = (*bytes)->Append(all, max);
    EXPECT_TRUE(appended.ok()) << appended.status().message();
    if (!appended.ok()) return "(failed)";
    EXPECT_LE(*appended, max);
    if (*appended == 0) break;
  }
  EXPECT_EQ((*bytes)->bytes_read(), all.size());
  EXPECT_EQ((*bytes)->stored_bytes(), fs::file_size(file));
  return all;
}

// The first error FileBytes meets reading `file` to its end.
Status StreamError(const fs::path& file, uint64_t max_bytes = uint64_t{1} << 40) {
  Result<std::unique_ptr<FileBytes>> bytes = FileBytes::Open(file, max_bytes);
  if (!bytes.ok()) return bytes.status();
  std::string all;
  for (;;) {
    Result<size_t> appended = (*bytes)->Append(all, 1 << 16);
    if (!appended.ok()) return appended.status();
    if (*appended == 0) return Status::Ok();
  }
}

Status WholeError(const fs::path& file, size_t budget = size_t{1} << 32) {
  return ReadWholeIfAtMost(file, budget, kPadding).status();
}

void ExpectOneLine(const Status& status, const fs::path& file, const std::string& words) {
  ASSERT_FALSE(status.ok()) << "expected: " << words;
  EXPECT_NE(status.message().find("'" + file.string() + "'"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(words), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
}

// ---- whole files ---------------------------------------------------------------------------

TEST(ReadWholeIfAtMost, PlainFileAsStored) {
  TempDir dir;
  const std::string text = SampleText(10000);
  const fs::path file = Write(dir, "trace.json", text);
  EXPECT_EQ(Whole(file), text);
  EXPECT_EQ(Whole(file, text.size()), text) << "exactly the budget fits";
}

TEST(ReadWholeIfAtMost, OneMember) {
  TempDir dir;
  const std::string text = SampleText(300000);
  const fs::path file = Write(dir, "trace.json.gz", Gzip(text));
  EXPECT_EQ(Whole(file), text);
  EXPECT_EQ(Whole(file, text.size()), text) << "exactly the budget fits";
}

// The last member's trailer is the only size guess; here it is far too small, so the output
// grows while earlier members inflate.
TEST(ReadWholeIfAtMost, SeveralMembers) {
  TempDir dir;
  const std::string first = SampleText(3 * kMiB);
  const std::string second = "{\"ph\": \"i\"}\n";
  const std::string third = SampleText(70000);
  const fs::path file = Write(dir, "trace.json.gz", Gzip(first) + Gzip(second, 1) + Gzip(third, 9));
  EXPECT_EQ(Whole(file), first + second + third);
  EXPECT_EQ(Whole(dir / "trace.json.gz", first.size() + second.size() + third.size()), first + second + third);
}

TEST(ReadWholeIfAtMost, ZeroPaddingAfterTheLastMember) {
  TempDir dir;
  const std::string text = SampleText(50000);
  // The trailer read as a size guess is zeros here.
  const fs::path file = Write(dir, "trace.json.gz", Gzip(text) + Gzip(text) + std::string(4096, '\0'));
  EXPECT_EQ(Whole(file), text + text);
}

TEST(ReadWholeIfAtMost, EmptyFileAndEmptyMember) {
  TempDir dir;
  EXPECT_EQ(Whole(Write(dir, "empty.json", "")), "");
  EXPECT_EQ(Whole(Write(dir, "empty.json.gz", Gzip(""))), "");
  EXPECT_EQ(Whole(Write(dir, "empty0.json", ""), 0), "");
}

TEST(ReadWholeIfAtMost, TruncatedGzip) {
  TempDir dir;
  const std::string gzip = Gzip(SampleText(100000));
  for (const size_t cut : {size_t{4}, size_t{12}, gzip.size() / 2, gzip.size() - 10}) {
    SCOPED_TRACE(cut);
    const fs::path file = Write(dir, "cut.json.gz", gzip.substr(0, cut));
    ExpectOneLine(WholeError(file), file, "truncated gzip file: the compressed data ends early");
  }
}

TEST(ReadWholeIfAtMost, DamagedGzip) {
  TempDir dir;
  std::string gzip = Gzip(SampleText(100000));
  std::string wrong_check = gzip;
  wrong_check[wrong_check.size() - 6] ^= 0x55;  // in the CRC-32
  const fs::path check = Write(dir, "check.json.gz", wrong_check);
  ExpectOneLine(WholeError(check), check, "damaged gzip file: incorrect data check");
  gzip[10] = static_cast<char>(0xff);  // the first block's header: BTYPE 3 is reserved
  const fs::path block = Write(dir, "block.json.gz", gzip);
  ExpectOneLine(WholeError(block), block, "damaged gzip file: invalid block type");
}

TEST(ReadWholeIfAtMost, SomethingElseAfterTheMembers) {
  TempDir dir;
  const std::string text = SampleText(20000);
  const fs::path file = Write(dir, "trace.json.gz", Gzip(text) + "not gzip");
  ExpectOneLine(WholeError(file), file, "damaged gzip file: 8 bytes of something else after the compressed data");
  // Zero padding followed by anything else is not padding.
  const fs::path zeros_then = Write(dir, "zeros.json.gz", Gzip(text) + std::string(3, '\0') + "x");
  ExpectOneLine(WholeError(zeros_then), zeros_then, "damaged gzip file: 4 bytes of something else");
}

TEST(ReadWholeIfAtMost, MoreThanTheBudgetIsNullopt) {
  TempDir dir;
  const std::string text = SampleText(100000);
  const fs::path plain = Write(dir, "trace.json", text);
  const fs::path gzip = Write(dir, "trace.json.gz", Gzip(text));
  for (const fs::path& file : {plain, gzip}) {
    SCOPED_TRACE(file);
    Result<std::optional<std::string>> read = ReadWholeIfAtMost(file, text.size() - 1, kPadding);
    ASSERT_TRUE(read.ok()) << read.status().message();
    EXPECT_FALSE(read->has_value());
  }
  // Over the budget in the second member only.
  const fs::path two = Write(dir, "two.json.gz", Gzip(text) + Gzip("x"));
  Result<std::optional<std::string>> read = ReadWholeIfAtMost(two, text.size(), kPadding);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_FALSE(read->has_value());
}

TEST(ReadWholeIfAtMost, MissingAndNotRegularFiles) {
  TempDir dir;
  ExpectOneLine(WholeError(dir / "missing.json.gz"), dir / "missing.json.gz", "no such file or directory");
  const fs::path fifo = dir / "fifo.json.gz";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ExpectOneLine(WholeError(fifo), fifo, "not a regular file (a FIFO)");
  ExpectOneLine(WholeError(dir.path()), dir.path(), "not a regular file (a directory)");
}

// ---- gzip bombs ----------------------------------------------------------------------------

// Peak resident memory of this process so far, in bytes.
uint64_t PeakResidentBytes() {
  rusage usage{};
  EXPECT_EQ(getrusage(RUSAGE_SELF, &usage), 0);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

TEST(GzipBomb, TheBombIsValidGzip) {
  TempDir dir;
  const fs::path file = Write(dir, "small_bomb.json.gz", ZeroBomb(5));
  EXPECT_EQ(Whole(file), std::string(5 * kMiB, '\0'));
  EXPECT_EQ(InPieces(file, 3 * kMiB), std::string(5 * kMiB, '\0'));
}

// 1 MiB on disk, 1 GiB inflated, its trailer telling the truth: refused holding about the
// budget, never the gigabyte.
TEST(GzipBomb, RefusedWithoutInflatingItWhole) {
  TempDir dir;
  const std::string bomb = ZeroBomb(1024);
  ASSERT_LT(bomb.size(), 2 * kMiB);
  const fs::path file = Write(dir, "bomb.json.gz", bomb);
  const uint64_t peak_before = PeakResidentBytes();

  Result<std::optional<std::string>> read = ReadWholeIfAtMost(file, 16 * kMiB, kPadding);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_FALSE(read->has_value());

  Result<std::unique_ptr<FileBytes>> bytes = FileBytes::Open(file, 16 * kMiB);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_TRUE((*bytes)->gzip());
  std::string out;
  Result<size_t> appended = size_t{0};
  while ((appended = (*bytes)->Append(out, kMiB)).ok()) {
    ASSERT_GT(*appended, 0u) << "the bomb ended early";
  }
  ExpectOneLine(appended.status(), file, "more than 16777216 bytes once unpacked");
  EXPECT_LE((*bytes)->bytes_read(), 17 * kMiB);
  ExpectOneLine((*bytes)->Append(out, kMiB).status(), file, "more than 16777216 bytes once unpacked");

  EXPECT_LT(PeakResidentBytes(), peak_before + 256 * kMiB);
}

// ---- pieces --------------------------------------------------------------------------------

TEST(FileBytes, PiecesMakeTheWhole) {
  TempDir dir;
  // Larger than the 4 MiB FileBytes reads at a time, so pieces of the file meet mid-member.
  const std::string first = SampleText(5 * kMiB + 123);
  const std::string second = SampleText(40000);
  const fs::path plain = Write(dir, "trace.json", first);
  const fs::path gzip = Write(dir, "trace.json.gz", Gzip(first, 1) + Gzip(second) + std::string(5 * kMiB, '\0'));
  for (const size_t max : {size_t{65536}, size_t{3} << 20, size_t{64} << 20}) {
    SCOPED_TRACE(max);
    EXPECT_EQ(InPieces(plain, max), first);
    EXPECT_EQ(InPieces(gzip, max), first + second);
  }
  EXPECT_EQ(Whole(gzip), first + second);
}

TEST(FileBytes, SmallPieces) {
  TempDir dir;
  const std::string text = SampleText(5000);
  const fs::path plain = Write(dir, "trace.json", text);
  const fs::path gzip = Write(dir, "trace.json.gz", Gzip(text) + Gzip(text) + std::string(7, '\0'));
  for (const size_t max : {size_t{1}, size_t{2}, size_t{7}, size_t{4096}}) {
    SCOPED_TRACE(max);
    EXPECT_EQ(InPieces(plain, max), text);
    EXPECT_EQ(InPieces(gzip, max), text + text);
  }
}

TEST(FileBytes, WhatItSaysAboutTheFile) {
  TempDir dir;
  const std::string text = SampleText(30000);
  const std::string gzip = Gzip(text);
  Result<std::unique_ptr<FileBytes>> bytes = FileBytes::Open(Write(dir, "trace.json.gz", gzip), 1 << 20);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_TRUE((*bytes)->gzip());
  EXPECT_EQ((*bytes)->stored_bytes(), gzip.size());
  EXPECT_EQ((*bytes)->bytes_read(), 0u);
  std::string out = "kept";
  Result<size_t> appended = (*bytes)->Append(out, 1000);
  ASSERT_TRUE(appended.ok()) << appended.status().message();
  EXPECT_EQ(*appended, 1000u);
  EXPECT_EQ(out, "kept" + text.substr(0, 1000));
  EXPECT_EQ((*bytes)->bytes_read(), 1000u);
  EXPECT_EQ(*(*bytes)->Append(out, 0), 0u);

  Result<std::unique_ptr<FileBytes>> plain = FileBytes::Open(Write(dir, "trace.json", text), 1 << 20);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE((*plain)->gzip());
  EXPECT_EQ((*plain)->stored_bytes(), text.size());
}

TEST(FileBytes, EmptyFile) {
  TempDir dir;
  for (const std::string& bytes : {std::string(), Gzip(""), std::string("\x1f")}) {
    const fs::path file = Write(dir, "empty.json.gz", bytes);
    EXPECT_EQ(InPieces(file, 100), bytes == "\x1f" ? bytes : "");
  }
}

TEST(FileBytes, TruncatedDamagedAndGarbage) {
  TempDir dir;
  const std::string text = SampleText(100000);
  const std::string gzip = Gzip(text);
  for (const size_t cut : {size_t{4}, gzip.size() / 2, gzip.size() - 10}) {
    SCOPED_TRACE(cut);
    const fs::path file = Write(dir, "cut.json.gz", gzip.substr(0, cut));
    ExpectOneLine(StreamError(file), file, "truncated gzip file: the compressed data ends early");
  }
  std::string wrong_check = gzip;
  wrong_check[wrong_check.size() - 6] ^= 0x55;
  const fs::path check = Write(dir, "check.json.gz", wrong_check);
  ExpectOneLine(StreamError(check), check, "damaged gzip file: incorrect data check");
  const fs::path garbage = Write(dir, "garbage.json.gz", gzip + Gzip("x") + "not gzip");
  ExpectOneLine(StreamError(garbage), garbage, "damaged gzip file: 8 bytes of something else after the compressed data");
}

TEST(FileBytes, AnErrorLeavesTheOutputAndStays) {
  TempDir dir;
  const std::string gzip = Gzip(SampleText(100000));
  const fs::path file = Write(dir, "cut.json.gz", gzip.substr(0, gzip.size() / 2));
  Result<std::unique_ptr<FileBytes>> bytes = FileBytes::Open(file, 1 << 20);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  std::string out = "before";
  ExpectOneLine((*bytes)->Append(out, 1 << 20).status(), file, "truncated gzip file");
  EXPECT_EQ(out, "before");
  ExpectOneLine((*bytes)->Append(out, 1).status(), file, "truncated gzip file");
}

TEST(FileBytes, MoreThanMaxBytes) {
  TempDir dir;
  const std::string text = SampleText(100000);
  const fs::path plain = Write(dir, "trace.json", text);
  ExpectOneLine(FileBytes::Open(plain, text.size() - 1).status(), plain, "100000 bytes, more than the 99999 allowed");
  EXPECT_EQ(InPieces(plain, 4096, text.size()), text) << "exactly max_bytes fits";
  const fs::path gzip = Write(dir, "trace.json.gz", Gzip(text));
  ExpectOneLine(StreamError(gzip, text.size() - 1), gzip, "more than 99999 bytes once unpacked");
  EXPECT_EQ(InPieces(gzip, 4096, text.size()), text) << "exactly max_bytes fits";
}

TEST(FileBytes, MissingAndNotRegularFiles) {
  TempDir dir;
  ExpectOneLine(FileBytes::Open(dir / "missing.json", 100).status(), dir / "missing.json", "no such file or directory");
  const fs::path fifo = dir / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ExpectOneLine(FileBytes::Open(fifo, 100).status(), fifo, "not a regular file (a FIFO)");
}

}  // namespace
}  // namespace rankscope::interop::import
