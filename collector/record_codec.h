// Internal to collector/ and its tests: how one record is laid out in a thread buffer, the
// one place that writes it (application threads) and reads it back (the drain thread).
//
// A record is a 16-byte fixed part (its unpadded size as a uint16 first, which
// ThreadBuffer reads; the kind; which optional words follow; the text's size; the range
// depth; the timestamp), then only the optional 8-byte words the event needs, in a fixed
// order (domain, registered string, category and colour, scalar payload kind and bits,
// value), the message text, and then an optional body starting at the next 8-byte
// boundary: either payload pieces (each a PieceHeader and its bytes, padded to 8) or one
// fixed-size struct (an NcclRecord, a hook body). Padding bytes are zero. A push in the
// default domain with a short message is 24 bytes, a pop 16: the size of a record is what
// an application thread writes and the drain thread reads per event.
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
  kHookCollectiveBegin = 10,  // ... and one it entered (HookCollectiveBody, end_ns unused)
};

// What one record may carry; longer text and pieces are cut, further pieces left out.
inline constexpr size_t kMaxRecordPieces = 8;
inline constexpr size_t kMaxPieceBytes = 4096;
inline constexpr size_t kMaxTextBytes = 4096;
// Range levels beyond this share the last one (nobody nests 65,535 ranges).
inline constexpr uint32_t kMaxRecordDepth = UINT16_MAX;

// What a record says: the encoder takes it, the reader gives it back (it is not the stored
// layout). Pointers are process-local: records never leave the process.
struct RecordHeader {
  uint32_t size = 0;  // whole record, unpadded: set by FrameRecord
  RecordKind kind = RecordKind::kMark;
  trace::PayloadKind payload_kind = trace::PayloadKind::kNone;
  uint8_t piece_count = 0;  // set by FrameRecord; counted by the reader
  uint8_t fields = 0;       // which optional words are stored: set by FrameRecord
  uint32_t depth = 0;
  uint32_t category = 0;
  uint32_t color = 0;
  uint32_t text_size = 0;   // set by FrameRecord
  uint64_t ticks = 0;
  const NvtxDomain* domain = nullptr;  // nullptr: the default domain (no word stored)
  const NvtxString* registered = nullptr;
  uint64_t payload_bits = 0;
  uint64_t value = 0;
};

struct PieceHeader {
  uint64_t schema_id = 0;
  uint32_t size = 0;    // payload bytes
  uint32_t padded = 0;  // payload bytes rounded up to 8: where the next piece starts
};
static_assert(sizeof(PieceHeader) == 16);

namespace record_codec_detail {

// The stored fixed part.
struct FixedPart {
  uint16_t size;
  RecordKind kind;
  uint8_t fields;
  uint16_t text_size;
  uint16_t depth;
  uint64_t ticks;
};
static_assert(sizeof(FixedPart) == 16);

// Bits of FixedPart::fields.
inline constexpr uint8_t kDomainWord = 1;
inline constexpr uint8_t kRegisteredWord = 2;
inline constexpr uint8_t kStyleWord = 4;    // category, color
inline constexpr uint8_t kScalarWords = 8;  // payload kind, payload bits: two words
inline constexpr uint8_t kValueWord = 16;
inline constexpr uint8_t kPiecesBody = 32;
inline constexpr uint8_t kFixedBody = 64;

constexpr size_t WordsOf(uint8_t fields) {
  return ((fields & kDomainWord) != 0) + ((fields & kRegisteredWord) != 0) + ((fields & kStyleWord) != 0) +
         2 * ((fields & kScalarWords) != 0) + ((fields & kValueWord) != 0);
}

inline uint8_t WordFieldsOf(const RecordHeader& header) {
  return static_cast<uint8_t>((header.domain != nullptr ? kDomainWord : 0) |
                              (header.registered != nullptr ? kRegisteredWord : 0) |
                              ((header.category | header.color) != 0 ? kStyleWord : 0) |
                              (header.payload_kind != trace::PayloadKind::kNone ? kScalarWords : 0) |
                              (header.value != 0 ? kValueWord : 0));
}

// Writes the fixed part, the optional words and the text; returns where the text ends.
inline size_t PutHeadAndText(std::byte* out, const RecordHeader& header, std::string_view text) {
  const FixedPart fixed{static_cast<uint16_t>(header.size), header.kind, header.fields,
                        static_cast<uint16_t>(header.text_size),
                        static_cast<uint16_t>(std::min(header.depth, kMaxRecordDepth)), header.ticks};
  std::memcpy(out, &fixed, sizeof(fixed));
  size_t offset = sizeof(fixed);
  auto put = [&](uint64_t word) {
    std::memcpy(out + offset, &word, sizeof(word));
    offset += sizeof(word);
  };
  if ((header.fields & kDomainWord) != 0) put(reinterpret_cast<uintptr_t>(header.domain));
  if ((header.fields & kRegisteredWord) != 0) put(reinterpret_cast<uintptr_t>(header.registered));
  if ((header.fields & kStyleWord) != 0) put(uint64_t{header.category} | uint64_t{header.color} << 32);
  if ((header.fields & kScalarWords) != 0) {
    put(static_cast<uint64_t>(header.payload_kind));
    put(header.payload_bits);
  }
  if ((header.fields & kValueWord) != 0) put(header.value);
  if (!text.empty()) std::memcpy(out + offset, text.data(), text.size());
  return offset + text.size();
}

}  // namespace record_codec_detail

constexpr size_t AlignRecordBytes(size_t bytes) { return (bytes + 7) & ~size_t{7}; }

// The bytes of a piece that a record keeps.
constexpr size_t KeptPieceBytes(const PayloadPiece& piece) { return std::min(piece.bytes.size(), kMaxPieceBytes); }

// Where the body starts in a record whose fixed part says `fields` and `text_size`.
constexpr size_t RecordBodyOffset(uint8_t fields, size_t text_size) {
  return AlignRecordBytes(sizeof(record_codec_detail::FixedPart) + 8 * record_codec_detail::WordsOf(fields) +
                          text_size);
}

// Frames `header` (everything but the framing and the timestamp set) for this text (at
// most kMaxTextBytes) and these pieces (at most kMaxRecordPieces): sets size, fields,
// text_size and piece_count, and returns the size. The caller then reserves the size, sets
// the timestamp last and encodes with the same text and pieces.
inline size_t FrameRecord(RecordHeader& header, std::string_view text, std::span<const PayloadPiece> pieces) {
  using namespace record_codec_detail;
  header.fields = WordFieldsOf(header);
  header.text_size = static_cast<uint32_t>(text.size());
  header.piece_count = static_cast<uint8_t>(pieces.size());
  size_t size = sizeof(FixedPart) + 8 * WordsOf(header.fields) + text.size();
  if (!pieces.empty()) {
    header.fields |= kPiecesBody;
    size = AlignRecordBytes(size);
    for (const PayloadPiece& piece : pieces) size += sizeof(PieceHeader) + AlignRecordBytes(KeptPieceBytes(piece));
  }
  header.size = static_cast<uint32_t>(size);
  return size;
}

// Likewise for a record with a fixed-size body of `Body` after the text.
template <typename Body>
size_t FrameRecordWithBody(RecordHeader& header, std::string_view text) {
  using namespace record_codec_detail;
  header.fields = WordFieldsOf(header) | kFixedBody;
  header.text_size = static_cast<uint32_t>(text.size());
  header.piece_count = 0;
  header.size = static_cast<uint32_t>(RecordBodyOffset(header.fields, text.size()) + sizeof(Body));
  return header.size;
}

// Writes a record framed by FrameRecord with the same text and pieces into `out`, which has
// room for header.size bytes.
inline void EncodeRecord(std::byte* out, const RecordHeader& header, std::string_view text,
                         std::span<const PayloadPiece> pieces) {
  size_t offset = record_codec_detail::PutHeadAndText(out, header, text);
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

// Writes a record framed by FrameRecordWithBody<Body> with the same text into `out`.
template <typename Body>
inline void EncodeRecordWithBody(std::byte* out, const RecordHeader& header, std::string_view text, const Body& body) {
  const size_t text_end = record_codec_detail::PutHeadAndText(out, header, text);
  const size_t body_offset = RecordBodyOffset(header.fields, text.size());
  std::memset(out + text_end, 0, body_offset - text_end);
  std::memcpy(out + body_offset, &body, sizeof(Body));
}

// The most common records, with fewer instructions: pushes and pops whose only attributes
// are a message (text or registered string), a category and a colour, in `domain` (nullptr:
// the default domain), and the range id that tags device work (0: none). The same bytes as
// FrameRecord + EncodeRecord of a header with only these fields, the kind, the depth and
// the ticks set (record_codec_test checks it).
struct PlainRecord {
  RecordKind kind = RecordKind::kPush;
  uint32_t depth = 0;
  const NvtxDomain* domain = nullptr;
  const NvtxString* registered = nullptr;
  uint32_t category = 0;
  uint32_t color = 0;
  uint64_t value = 0;
};
constexpr size_t PlainRecordSize(const PlainRecord& record, size_t text_size) {
  return sizeof(record_codec_detail::FixedPart) + (record.domain != nullptr ? 8 : 0) +
         (record.registered != nullptr ? 8 : 0) + ((record.category | record.color) != 0 ? 8 : 0) +
         (record.value != 0 ? 8 : 0) + text_size;
}
inline void EncodePlainRecord(std::byte* out, size_t size, const PlainRecord& record, uint64_t ticks, const char* text,
                              size_t text_size) {
  using namespace record_codec_detail;
  const bool styled = (record.category | record.color) != 0;
  const auto fields = static_cast<uint8_t>((record.domain != nullptr ? kDomainWord : 0) |
                                           (record.registered != nullptr ? kRegisteredWord : 0) |
                                           (styled ? kStyleWord : 0) | (record.value != 0 ? kValueWord : 0));
  const FixedPart fixed{static_cast<uint16_t>(size), record.kind, fields, static_cast<uint16_t>(text_size),
                        static_cast<uint16_t>(std::min(record.depth, kMaxRecordDepth)), ticks};
  std::memcpy(out, &fixed, sizeof(fixed));
  out += sizeof(fixed);
  auto put = [&](uint64_t word) {
    std::memcpy(out, &word, sizeof(word));
    out += sizeof(word);
  };
  if (record.domain != nullptr) put(reinterpret_cast<uintptr_t>(record.domain));
  if (record.registered != nullptr) put(reinterpret_cast<uintptr_t>(record.registered));
  if (styled) put(uint64_t{record.category} | uint64_t{record.color} << 32);
  if (record.value != 0) put(record.value);
  if (text_size > 0) std::memcpy(out, text, text_size);
}

// Reads one record as ThreadBuffer::Drain hands it over. Nothing it returns reaches past the
// record's bytes, whatever its fixed part claims.
class RecordReader {
 public:
  // nullopt when `record` is too short for its fixed part and the words it announces.
  static std::optional<RecordReader> Open(std::span<const std::byte> record) {
    using namespace record_codec_detail;
    if (record.size() < sizeof(FixedPart)) return std::nullopt;
    FixedPart fixed;
    std::memcpy(&fixed, record.data(), sizeof(fixed));
    if (sizeof(FixedPart) + 8 * WordsOf(fixed.fields) > record.size()) return std::nullopt;
    return RecordReader(record, fixed);
  }

  const RecordHeader& header() const { return header_; }

  // The message text, cut where the record ends.
  std::string_view text() const {
    return {reinterpret_cast<const char*>(record_.data()) + text_offset_,
            std::min<size_t>(header_.text_size, record_.size() - text_offset_)};
  }

  // The fixed-size body; nullopt when the record has none or ends before it does.
  template <typename Body>
  std::optional<Body> body() const {
    if ((header_.fields & record_codec_detail::kFixedBody) == 0) return std::nullopt;
    const size_t offset = RecordBodyOffset(header_.fields, header_.text_size);
    if (offset + sizeof(Body) > record_.size()) return std::nullopt;
    Body out;
    std::memcpy(&out, record_.data() + offset, sizeof(out));
    return out;
  }

  // Calls visit(schema_id, bytes) for each payload piece, in order, up to the first one the
  // record does not hold whole.
  template <typename Visit>
  void ForEachPiece(Visit&& visit) const {
    if ((header_.fields & record_codec_detail::kPiecesBody) == 0) return;
    size_t offset = RecordBodyOffset(header_.fields, header_.text_size);
    while (offset + sizeof(PieceHeader) <= record_.size()) {
      PieceHeader piece;
      std::memcpy(&piece, record_.data() + offset, sizeof(piece));
      offset += sizeof(PieceHeader);
      if (offset + piece.size > record_.size() || piece.padded < piece.size) break;
      visit(piece.schema_id, record_.subspan(offset, piece.size));
      offset += piece.padded;
    }
  }

 private:
  RecordReader(std::span<const std::byte> record, const record_codec_detail::FixedPart& fixed) : record_(record) {
    using namespace record_codec_detail;
    header_.size = fixed.size;
    header_.kind = fixed.kind;
    header_.fields = fixed.fields;
    header_.text_size = fixed.text_size;
    header_.depth = fixed.depth;
    header_.ticks = fixed.ticks;
    size_t offset = sizeof(FixedPart);
    auto take = [&] {
      uint64_t word = 0;
      std::memcpy(&word, record.data() + offset, sizeof(word));
      offset += sizeof(word);
      return word;
    };
    if ((fixed.fields & kDomainWord) != 0) header_.domain = reinterpret_cast<const NvtxDomain*>(take());
    if ((fixed.fields & kRegisteredWord) != 0) header_.registered = reinterpret_cast<const NvtxString*>(take());
    if ((fixed.fields & kStyleWord) != 0) {
      const uint64_t style = take();
      header_.category = static_cast<uint32_t>(style);
      header_.color = static_cast<uint32_t>(style >> 32);
    }
    if ((fixed.fields & kScalarWords) != 0) {
      header_.payload_kind = static_cast<trace::PayloadKind>(take());
      header_.payload_bits = take();
    }
    if ((fixed.fields & kValueWord) != 0) header_.value = take();
    text_offset_ = offset;
    ForEachPiece([&](uint64_t, std::span<const std::byte>) { ++header_.piece_count; });
  }

  std::span<const std::byte> record_;
  RecordHeader header_;
  size_t text_offset_ = 0;
};

}  // namespace rankscope::collector
