#include "collector/record_codec.h"

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collector/nccl_events.h"
#include "collector/thread_buffer.h"

namespace rankscope::collector {
namespace {

std::vector<std::byte> Bytes(size_t count, uint8_t first) {
  std::vector<std::byte> bytes(count);
  for (size_t i = 0; i < count; ++i) bytes[i] = static_cast<std::byte>(static_cast<uint8_t>(first + i * 7));
  return bytes;
}

struct DecodedPiece {
  uint64_t schema_id;
  std::vector<std::byte> bytes;
};

std::vector<DecodedPiece> PiecesOf(const RecordReader& reader) {
  std::vector<DecodedPiece> pieces;
  reader.ForEachPiece([&](uint64_t schema_id, std::span<const std::byte> bytes) {
    pieces.push_back({schema_id, std::vector<std::byte>(bytes.begin(), bytes.end())});
  });
  return pieces;
}

// Encodes through a real ThreadBuffer (which reads the size word first) and drains it back.
std::vector<std::vector<std::byte>> ThroughThreadBuffer(const std::vector<std::vector<std::byte>>& records) {
  ChunkPool pool(1 << 20);
  pool.Prepare(4);
  ThreadBuffer buffer(&pool, 7, "codec", 1);
  for (const std::vector<std::byte>& record : records) {
    std::byte* out = buffer.Reserve(record.size());
    EXPECT_NE(out, nullptr);
    if (out == nullptr) return {};
    std::memcpy(out, record.data(), record.size());
    buffer.Commit(record.size());
  }
  std::vector<std::vector<std::byte>> drained;
  buffer.Drain([&](std::span<const std::byte> record) { drained.emplace_back(record.begin(), record.end()); });
  return drained;
}

// `fields` holds everything but the framing, which is set here for `text` and `pieces`.
std::vector<std::byte> EncodeWithPieces(const RecordHeader& fields, std::string_view text,
                                        std::span<const PayloadPiece> pieces) {
  RecordHeader header = fields;
  const size_t size = FrameRecord(header, text, pieces);
  std::vector<std::byte> out(size, std::byte{0xAB});  // padding must be written, not inherited
  if (std::byte* data = out.data(); data != nullptr) EncodeRecord(data, header, text, pieces);
  return out;
}

std::vector<std::byte> EncodeNccl(const NcclRecord& nccl, std::string_view text, uint64_t ticks) {
  RecordHeader header;
  header.kind = RecordKind::kNccl;
  const size_t size = FrameRecordWithBody<NcclRecord>(header, text);
  header.ticks = ticks;
  std::vector<std::byte> out(size, std::byte{0xAB});
  if (std::byte* data = out.data(); data != nullptr) EncodeRecordWithBody(data, header, text, nccl);
  return out;
}

RecordHeader HeaderOf(RecordKind kind, uint64_t seed) {
  static const NvtxDomain domain{"codec", true};
  static const NvtxString registered{&domain, "registered"};
  RecordHeader header;
  header.kind = kind;
  header.payload_kind = trace::PayloadKind::kInt64;
  header.depth = static_cast<uint32_t>(seed + 1);
  header.category = static_cast<uint32_t>(seed + 2);
  header.color = 0xFF00FF00u + static_cast<uint32_t>(seed);
  header.ticks = 1'000'000'007ULL * (seed + 1);
  header.domain = &domain;
  header.registered = seed % 2 == 0 ? &registered : nullptr;
  header.payload_bits = 0xDEADBEEF00000000ULL | seed;
  header.value = seed * 31 + 5;
  return header;
}

void ExpectSameHeader(const RecordHeader& got, const RecordHeader& want) {
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.payload_kind, want.payload_kind);
  EXPECT_EQ(got.depth, want.depth);
  EXPECT_EQ(got.category, want.category);
  EXPECT_EQ(got.color, want.color);
  EXPECT_EQ(got.ticks, want.ticks);
  EXPECT_EQ(got.domain, want.domain);
  EXPECT_EQ(got.registered, want.registered);
  EXPECT_EQ(got.payload_bits, want.payload_bits);
  EXPECT_EQ(got.value, want.value);
}

TEST(RecordCodec, EveryNvtxKindRoundTripsThroughAThreadBuffer) {
  const std::vector<std::byte> first = Bytes(13, 1);   // not a multiple of 8: padded
  const std::vector<std::byte> second = Bytes(16, 50);  // a multiple of 8
  const std::vector<std::byte> empty;
  const PayloadPiece pieces[] = {{101, first}, {102, second}, {103, empty}};
  const RecordKind kinds[] = {RecordKind::kPush, RecordKind::kPop, RecordKind::kStart,
                              RecordKind::kEnd,  RecordKind::kMark, RecordKind::kNameThread};
  // Text lengths around the 8-byte boundary, with and without pieces.
  const std::string texts[] = {"", "a", "seven!!", "eight!!!", "a longer message of some length"};

  std::vector<std::vector<std::byte>> encoded;
  std::vector<RecordHeader> headers;
  std::vector<std::string> record_texts;
  std::vector<size_t> piece_counts;
  uint64_t seed = 0;
  for (RecordKind kind : kinds) {
    for (const std::string& text : texts) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{3}}) {
        const RecordHeader header = HeaderOf(kind, seed++);
        encoded.push_back(EncodeWithPieces(header, text, std::span(pieces, count)));
        headers.push_back(header);
        record_texts.push_back(text);
        piece_counts.push_back(count);
      }
    }
  }
  const std::vector<std::vector<std::byte>> drained = ThroughThreadBuffer(encoded);
  ASSERT_EQ(drained.size(), encoded.size());
  for (size_t i = 0; i < drained.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "record " << i << " text '" << record_texts[i] << "' pieces "
                                      << piece_counts[i]);
    EXPECT_EQ(drained[i], encoded[i]);
    const std::optional<RecordReader> reader = RecordReader::Open(drained[i]);
    ASSERT_TRUE(reader.has_value());
    ExpectSameHeader(reader->header(), headers[i]);
    EXPECT_EQ(reader->header().size, drained[i].size());
    EXPECT_EQ(reader->header().text_size, record_texts[i].size());
    EXPECT_EQ(reader->header().piece_count, piece_counts[i]);
    EXPECT_EQ(reader->text(), record_texts[i]);
    const std::vector<DecodedPiece> decoded = PiecesOf(*reader);
    ASSERT_EQ(decoded.size(), piece_counts[i]);
    for (size_t p = 0; p < decoded.size(); ++p) {
      EXPECT_EQ(decoded[p].schema_id, pieces[p].schema_id);
      EXPECT_TRUE(std::equal(decoded[p].bytes.begin(), decoded[p].bytes.end(), pieces[p].bytes.begin(),
                             pieces[p].bytes.end()));
    }
  }
}

TEST(RecordCodec, PaddingIsZeroAndPiecesStartEightAligned) {
  const std::vector<std::byte> bytes = Bytes(5, 9);
  const PayloadPiece pieces[] = {{7, bytes}, {8, bytes}};
  const std::string text = "abc";
  const std::vector<std::byte> record = EncodeWithPieces(HeaderOf(RecordKind::kMark, 1), text, pieces);
  // Fixed part 16 + five words 40 (domain, style, scalar kind and bits, value; seed 1 has no
  // registered string) + text 3 = 59 -> body at 64; each piece: 16 + 5 bytes padded to 8.
  ASSERT_EQ(record.size(), 64u + 2 * (16u + 8u));
  for (size_t i = 59; i < 64; ++i) EXPECT_EQ(record[i], std::byte{0}) << i;
  for (size_t piece = 0; piece < 2; ++piece) {
    const size_t data = 64 + piece * 24 + 16;
    for (size_t i = data + bytes.size(); i < data + 8; ++i) EXPECT_EQ(record[i], std::byte{0}) << i;
  }
  // Without pieces, nothing follows the text and nothing is padded.
  RecordHeader plain = HeaderOf(RecordKind::kMark, 1);
  EXPECT_EQ(FrameRecord(plain, text, {}), 59u);
}

TEST(RecordCodec, CommonRangesStoreOnlyWhatTheyCarry) {
  // nvtxRangePushA("pair") in the default domain: fixed part 16 + text 4 = 20 bytes
  // (24 in a buffer); its pop: the fixed part alone.
  RecordHeader push;
  push.kind = RecordKind::kPush;
  push.depth = 1;
  EXPECT_EQ(FrameRecord(push, "pair", {}), 20u);
  RecordHeader pop;
  pop.kind = RecordKind::kPop;
  pop.depth = 1;
  EXPECT_EQ(FrameRecord(pop, "", {}), 16u);
  // In a domain of its own, with a category: two words more.
  static const NvtxDomain domain{"mine", true};
  RecordHeader styled = push;
  styled.domain = &domain;
  styled.category = 3;
  EXPECT_EQ(FrameRecord(styled, "pair", {}), 36u);
  push.ticks = pop.ticks = styled.ticks = 77;
  const std::vector<std::vector<std::byte>> drained =
      ThroughThreadBuffer({EncodeWithPieces(push, "pair", {}), EncodeWithPieces(pop, "", {}),
                           EncodeWithPieces(styled, "pair", {})});
  ASSERT_EQ(drained.size(), 3u);
  ExpectSameHeader(RecordReader::Open(drained[0])->header(), push);
  EXPECT_EQ(RecordReader::Open(drained[0])->text(), "pair");
  ExpectSameHeader(RecordReader::Open(drained[1])->header(), pop);
  ExpectSameHeader(RecordReader::Open(drained[2])->header(), styled);
  EXPECT_EQ(RecordReader::Open(drained[2])->header().domain, &domain);
  EXPECT_EQ(RecordReader::Open(drained[0])->header().domain, nullptr);  // the default domain
}

TEST(RecordCodec, PlainRecordsAreTheGeneralEncoding) {
  static const NvtxDomain domain{"mine", true};
  static const NvtxString registered{&domain, "registered"};
  for (const NvtxDomain* in : {static_cast<const NvtxDomain*>(nullptr), &domain}) {
    for (const NvtxString* name : {static_cast<const NvtxString*>(nullptr), &registered}) {
      for (uint32_t category : {0u, 7u}) {
        for (std::string_view text : {std::string_view(""), std::string_view("pair"), std::string_view("eight!!!")}) {
          for (RecordKind kind : {RecordKind::kPush, RecordKind::kPop}) {
            RecordHeader header;
            header.value = category != 0 && kind == RecordKind::kPush ? (uint64_t{3} << 40 | 9) : 0;
            header.kind = kind;
            header.depth = 70000;  // beyond the stored range: both cut it the same way
            header.domain = in;
            header.registered = name;
            header.category = category;
            header.color = category != 0 ? 0xFF112233u : 0;
            header.ticks = 123456789;
            const std::vector<std::byte> general = EncodeWithPieces(header, text, {});
            const PlainRecord record{kind, header.depth, in, name, header.category, header.color, header.value};
            const size_t size = PlainRecordSize(record, text.size());
            ASSERT_EQ(size, general.size());
            std::vector<std::byte> plain(size, std::byte{0xAB});
            if (std::byte* data = plain.data(); data != nullptr) {
              EncodePlainRecord(data, size, record, header.ticks, text.data(), text.size());
            }
            EXPECT_EQ(plain, general) << text;
            EXPECT_EQ(RecordReader::Open(plain)->header().depth, kMaxRecordDepth);
          }
        }
      }
    }
  }
}

TEST(RecordCodec, NcclRecordRoundTripsWithItsText) {
  NcclRecord nccl;
  nccl.id = 11;
  nccl.parent = 12;
  nccl.comm = 13;
  nccl.comm_hash = 0x1234567890ABCDEFULL;
  nccl.sequence = 99;
  nccl.count = 1 << 20;
  nccl.rank = 3;
  nccl.ranks = 8;
  nccl.kind = NcclRecordKind::kStop;
  nccl.event = NcclEventKind::kColl;
  nccl.api_version = 5;
  std::vector<std::vector<std::byte>> encoded;
  for (std::string_view text : {std::string_view(""), std::string_view("AllReduce\0float\0RING\0LL\0", 25)}) {
    encoded.push_back(EncodeNccl(nccl, text, 42));
  }
  const std::vector<std::vector<std::byte>> drained = ThroughThreadBuffer(encoded);
  ASSERT_EQ(drained.size(), 2u);
  for (size_t i = 0; i < drained.size(); ++i) {
    const std::optional<RecordReader> reader = RecordReader::Open(drained[i]);
    ASSERT_TRUE(reader.has_value());
    EXPECT_EQ(reader->header().kind, RecordKind::kNccl);
    EXPECT_EQ(reader->header().ticks, 42u);
    EXPECT_EQ(reader->header().size, drained[i].size());
    EXPECT_EQ(reader->text().size(), i == 0 ? 0u : 25u);
    const std::optional<NcclRecord> body = reader->body<NcclRecord>();
    ASSERT_TRUE(body.has_value());
    EXPECT_EQ(std::memcmp(&*body, &nccl, sizeof(nccl)), 0);
    // Fixed part 16, no optional word, the text, zeros up to the body.
    for (size_t b = 16 + reader->text().size(); b < RecordBodyOffset(reader->header().fields, reader->text().size());
         ++b) {
      EXPECT_EQ(drained[i][b], std::byte{0}) << b;
    }
  }
}

TEST(RecordCodec, TruncatedRecordsNeverReadPastTheirEnd) {
  const std::vector<std::byte> first = Bytes(12, 3);
  const std::vector<std::byte> second = Bytes(20, 40);
  const PayloadPiece pieces[] = {{1, first}, {2, second}};
  const std::string text = "truncated";
  const std::vector<std::byte> whole = EncodeWithPieces(HeaderOf(RecordKind::kPush, 4), text, pieces);
  // Fixed part 16 + six words 48 + text 9 = 73 -> body at 80.
  const size_t body = RecordBodyOffset(RecordReader::Open(whole)->header().fields, text.size());
  ASSERT_EQ(body, 80u);
  const size_t second_piece = body + sizeof(PieceHeader) + AlignRecordBytes(first.size());  // 80 + 16 + 16

  // Shorter than the fixed part, or than the words it announces: no record at all.
  EXPECT_FALSE(RecordReader::Open(std::span(whole).first(15)).has_value());
  EXPECT_FALSE(RecordReader::Open(std::span(whole).first(63)).has_value());
  EXPECT_FALSE(RecordReader::Open(std::span<const std::byte>()).has_value());

  // Cut inside the text: the text stops at the cut, and no piece is read.
  const auto in_text = RecordReader::Open(std::span(whole).first(64 + 4));
  ASSERT_TRUE(in_text.has_value());
  EXPECT_EQ(in_text->text(), "trun");
  EXPECT_TRUE(PiecesOf(*in_text).empty());

  // Cut inside the second piece's bytes: only the first piece, whole.
  const auto in_piece = RecordReader::Open(std::span(whole).first(second_piece + sizeof(PieceHeader) + 5));
  ASSERT_TRUE(in_piece.has_value());
  EXPECT_EQ(in_piece->text(), text);
  const std::vector<DecodedPiece> kept = PiecesOf(*in_piece);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].schema_id, 1u);
  EXPECT_EQ(kept[0].bytes, first);

  // Cut inside the second piece's header: the same.
  EXPECT_EQ(PiecesOf(*RecordReader::Open(std::span(whole).first(second_piece + 8))).size(), 1u);
  // The whole record: both.
  EXPECT_EQ(PiecesOf(*RecordReader::Open(whole)).size(), 2u);

  // A fixed-size body the record does not hold whole is not read.
  const std::vector<std::byte> out = EncodeNccl(NcclRecord{}, "", 1);
  EXPECT_TRUE(RecordReader::Open(out)->body<NcclRecord>().has_value());
  EXPECT_FALSE(RecordReader::Open(std::span(out).first(out.size() - 1))->body<NcclRecord>().has_value());

  // A header that claims more text than the record holds.
  std::vector<std::byte> lying = EncodeWithPieces(HeaderOf(RecordKind::kMark, 2), "abcd", {});
  const uint16_t claimed = 1000;
  std::memcpy(lying.data() + 4, &claimed, sizeof(claimed));  // the fixed part's text size
  EXPECT_EQ(RecordReader::Open(lying)->text(), "abcd");
  EXPECT_FALSE(RecordReader::Open(lying)->body<NcclRecord>().has_value());
}

TEST(RecordCodec, MaximumRecordIsCutToTheLimitsAndFitsAChunk) {
  const std::string text(kMaxTextBytes, 'x');
  const std::vector<std::byte> oversized = Bytes(kMaxPieceBytes + 100, 17);
  std::vector<PayloadPiece> pieces(kMaxRecordPieces);
  for (size_t i = 0; i < pieces.size(); ++i) pieces[i] = {1000 + i, oversized};
  RecordHeader framed = HeaderOf(RecordKind::kPop, 9);  // five words: no registered string
  const size_t size = FrameRecord(framed, text, pieces);
  EXPECT_EQ(size, 16 + 40 + kMaxTextBytes + kMaxRecordPieces * (16 + kMaxPieceBytes));
  EXPECT_LE(size, ThreadBuffer::kMaxRecordBytes);

  const std::vector<std::vector<std::byte>> drained =
      ThroughThreadBuffer({EncodeWithPieces(HeaderOf(RecordKind::kPop, 9), text, pieces)});
  ASSERT_EQ(drained.size(), 1u);
  ASSERT_EQ(drained[0].size(), size);
  const std::optional<RecordReader> reader = RecordReader::Open(drained[0]);
  ASSERT_TRUE(reader.has_value());
  EXPECT_EQ(reader->text(), text);
  EXPECT_EQ(reader->header().piece_count, kMaxRecordPieces);
  const std::vector<DecodedPiece> decoded = PiecesOf(*reader);
  ASSERT_EQ(decoded.size(), kMaxRecordPieces);
  for (size_t i = 0; i < decoded.size(); ++i) {
    EXPECT_EQ(decoded[i].schema_id, 1000 + i);
    ASSERT_EQ(decoded[i].bytes.size(), kMaxPieceBytes);
    EXPECT_TRUE(std::equal(decoded[i].bytes.begin(), decoded[i].bytes.end(), oversized.begin()));
  }
}

}  // namespace
}  // namespace rankscope::collector
