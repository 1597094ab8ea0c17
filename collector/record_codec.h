// Internal to collector/ and its tests: how one record is laid out in a thread buffer, the
// one place that writes it (application threads) and reads it back (the drain thread).
//
// A record is a RecordHeader (64 bytes; its first word is the record's unpadded size,
// which ThreadBuffer reads), the message text, and then an optional body starting at the
// next 8-byte boundary: either payload pieces (each a PieceHeader and its bytes, padded to
// 8) or one fixed-size struct (an NcclRecord). Padding bytes are zero.
//
// Everything here is inline and allocation-free: encoding runs on the application thread
// inside every NVTX handler.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

#include "collector/nvtx_registry.h"
#include "collector/payload_decoder.h"
#include "trace/events.h"

namespace rankscope::collector {

enum class RecordKind : uint8_t {
  kPush = 1, kPop = 2, kStart = 3, kEnd = 4, kMark = 5, kNameThread = 6,
  kNccl = 7,  // an NCCL profiler-plugin callback (collector/nccl_events.h)
  kHookRange = 8,       // a language hook's finished range (collector/hook_events.h)
  kHookCollective = 9,  // a language hook's finished collective
};

// What one record may carry; longer text and pieces are cut, further pieces left out.
inline constexpr size_t kMaxRecordPieces = 8;
inline constexpr size_t kMaxPieceBytes = 4096;
inline constexpr size_t kMaxTextBytes = 4096;

// The fixed part of every record. Pointers are process-local: records never leave it.
struct RecordHeader {
  uint32_t size = 0;  // whole record, unpadded; ThreadBuffer reads it first
  RecordKind kind = RecordKind::kMark;
  trace::PayloadKind payload_kind = trace::PayloadKind::kNone;
  uint8_t has_registered = 0;
  uint8_t piece_count = 0;
  uint32_t depth = 0;
  uint32_t category = 0;
  uint32_t color = 0;
  uint32_t text_size = 0;
  uint64_t ticks = 0;
  const NvtxDomain* domain = nullptr;
  const NvtxString* registered = nullptr;
  uint64_t payload_bits = 0;
  uint64_t value = 0;
};
static_assert(sizeof(RecordHeader) == 64);

struct PieceHeader {
  uint64_t schema_id = 0;
  uint32_t size = 0;    // payload bytes
  uint32_t padded = 0;  // payload bytes rounded up to 8: where the next piece starts
};
static_assert(sizeof(PieceHeader) == 16);

constexpr size_t AlignRecordBytes(size_t bytes) { return (bytes + 7) & ~size_t{7}; }

// Where the body starts after the header and `text_size` bytes of text.
constexpr size_t RecordBodyOffset(size_t text_size) { return AlignRecordBytes(sizeof(RecordHeader) + text_size); }

// The bytes of a piece that a record keeps.
constexpr size_t KeptPieceBytes(const PayloadPiece& piece) { return std::min(piece.bytes.size(), kMaxPieceBytes); }

// The unpadded size of a record with `text_size` bytes of text and `pieces` (at most
// kMaxRecordPieces; text at most kMaxTextBytes).
inline size_t RecordSize(size_t text_size, std::span<const PayloadPiece> pieces) {
  size_t size = sizeof(RecordHeader) + text_size;
  if (!pieces.empty()) {
    size = RecordBodyOffset(text_size);
    for (const PayloadPiece& piece : pieces) size += sizeof(PieceHeader) + AlignRecordBytes(KeptPieceBytes(piece));
  }
  return size;
}

// The size of a record with `text_size` bytes of text and a fixed-size body of `Body`.
template <typename Body>
constexpr size_t RecordSizeWithBody(size_t text_size) {
  return RecordBodyOffset(text_size) + sizeof(Body);
}

// A header with its framing fields set: kind, size (RecordSize or RecordSizeWithBody),
// text_size and piece_count. The caller sets the rest, the timestamp last, and encodes it
// with the same text and pieces.
inline RecordHeader FramedRecordHeader(RecordKind kind, size_t size, size_t text_size, size_t piece_count) {
  RecordHeader header;
  header.size = static_cast<uint32_t>(size);
  header.kind = kind;
  header.piece_count = static_cast<uint8_t>(piece_count);
  header.text_size = static_cast<uint32_t>(text_size);
  return header;
}

namespace record_codec_detail {
// The header and the text after it; returns where the text ends.
inline size_t PutHeaderAndText(std::byte* out, const RecordHeader& header, std::string_view text) {
  std::memcpy(out, &header, sizeof(header));
  if (!text.empty()) std::memcpy(out + sizeof(header), text.data(), text.size());
  return sizeof(header) + text.size();
}
}  // namespace record_codec_detail

// Writes a record into `out`, which has room for header.size == RecordSize(text.size(),
// pieces) bytes. `header` is framed for this text and these pieces (FramedRecordHeader).
inline void EncodeRecord(std::byte* out, const RecordHeader& header, std::string_view text,
                         std::span<const PayloadPiece> pieces) {
  size_t offset = record_codec_detail::PutHeaderAndText(out, header, text);
  if (pieces.empty()) return;
  const size_t body = AlignRecordBytes(offset);
  std::memset(out + offset, 0, body - offset);
  offset = body;
  for (const PayloadPiece& piece : pieces) {
    const size_t bytes = KeptPieceBytes(piece);
    const size_t padded = AlignRecordBytes(bytes);
    const PieceHeader piece_header{piece.schema_id, static_cast<uint32_t>(bytes), static_cast<uint32_t>(padded)};
    std::memcpy(out + offset, &piece_header, sizeof(piece_header));
    offset += sizeof(piece_header);
    if (bytes > 0) std::memcpy(out + offset, piece.bytes.data(), bytes);
    std::memset(out + offset + bytes, 0, padded - bytes);
    offset += padded;
  }
}

// Writes a record with a fixed-size body into `out`, which has room for header.size ==
// RecordSizeWithBody<Body>(text.size()) bytes; `header` is framed for this text, no pieces.
template <typename Body>
inline void EncodeRecordWithBody(std::byte* out, const RecordHeader& header, std::string_view text, const Body& body) {
  const size_t text_end = record_codec_detail::PutHeaderAndText(out, header, text);
  const size_t body_offset = RecordBodyOffset(text.size());
  std::memset(out + text_end, 0, body_offset - text_end);
  std::memcpy(out + body_offset, &body, sizeof(Body));
}

// Reads one record as ThreadBuffer::Drain hands it over. Nothing it returns reaches past the
// record's bytes, whatever its header claims.
class RecordReader {
 public:
  // nullopt when `record` is too short to hold a header.
  static std::optional<RecordReader> Open(std::span<const std::byte> record) {
    if (record.size() < sizeof(RecordHeader)) return std::nullopt;
    return RecordReader(record);
  }

  const RecordHeader& header() const { return header_; }

  // The message text, cut where the record ends.
  std::string_view text() const {
    return {reinterpret_cast<const char*>(record_.data()) + sizeof(RecordHeader),
            std::min<size_t>(header_.text_size, record_.size() - sizeof(RecordHeader))};
  }

  // The fixed-size body; nullopt when the record ends before it does.
  template <typename Body>
  std::optional<Body> body() const {
    const size_t offset = RecordBodyOffset(header_.text_size);
    if (offset + sizeof(Body) > record_.size()) return std::nullopt;
    Body out;
    std::memcpy(&out, record_.data() + offset, sizeof(out));
    return out;
  }

  // Calls visit(schema_id, bytes) for each payload piece, in order, up to the first one the
  // record does not hold whole.
  template <typename Visit>
  void ForEachPiece(Visit&& visit) const {
    size_t offset = RecordBodyOffset(header_.text_size);
    for (int i = 0; i < header_.piece_count && offset + sizeof(PieceHeader) <= record_.size(); ++i) {
      PieceHeader piece;
      std::memcpy(&piece, record_.data() + offset, sizeof(piece));
      offset += sizeof(PieceHeader);
      if (offset + piece.size > record_.size()) break;
      visit(piece.schema_id, record_.subspan(offset, piece.size));
      offset += piece.padded;
    }
  }

 private:
  explicit RecordReader(std::span<const std::byte> record) : record_(record) {
    std::memcpy(&header_, record.data(), sizeof(header_));
  }

  std::span<const std::byte> record_;
  RecordHeader header_;
};

}  // namespace rankscope::collector
