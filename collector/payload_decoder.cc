#include "collector/payload_decoder.h"

#include <nvtx3/nvToolsExtPayload.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>

namespace rankscope::collector {
namespace {

constexpr int kMaxNesting = 8;

template <typename T>
T Load(std::span<const std::byte> bytes, size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// A scalar of `type` at `offset`, or null when it does not fit or is not a plain number.
nlohmann::json ReadScalar(uint64_t type, std::span<const std::byte> bytes, size_t offset) {
  auto [size, align] = PayloadTypeLayout(type);
  (void)align;
  if (size == 0 || offset + size > bytes.size()) return nullptr;
  switch (type) {
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR: case NVTX_PAYLOAD_ENTRY_TYPE_INT8:
      return Load<int8_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_UCHAR: case NVTX_PAYLOAD_ENTRY_TYPE_UINT8:
    case NVTX_PAYLOAD_ENTRY_TYPE_BYTE: case NVTX_PAYLOAD_ENTRY_TYPE_CHAR8:
      return Load<uint8_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_SHORT: case NVTX_PAYLOAD_ENTRY_TYPE_INT16:
      return Load<int16_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_USHORT: case NVTX_PAYLOAD_ENTRY_TYPE_UINT16:
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR16:
      return Load<uint16_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_INT: case NVTX_PAYLOAD_ENTRY_TYPE_INT32:
      return Load<int32_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT: case NVTX_PAYLOAD_ENTRY_TYPE_UINT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR32: case NVTX_PAYLOAD_ENTRY_TYPE_WCHAR:
    case NVTX_PAYLOAD_ENTRY_TYPE_CATEGORY: case NVTX_PAYLOAD_ENTRY_TYPE_COLOR_ARGB:
    case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT32: case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT32:
      return Load<uint32_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_LONG: case NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT64:
      return Load<int64_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_ULONG: case NVTX_PAYLOAD_ENTRY_TYPE_ULONGLONG:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT64: case NVTX_PAYLOAD_ENTRY_TYPE_SIZE:
    case NVTX_PAYLOAD_ENTRY_TYPE_SCOPE_ID: case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT64:
      return Load<uint64_t>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT: case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT32:
      return Load<float>(bytes, offset);
    case NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE: case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64:
      return Load<double>(bytes, offset);
    default:
      return nullptr;  // addresses, 128-bit and half floats: not worth a guess
  }
}

uint64_t ReadUnsigned(std::span<const std::byte> bytes, size_t offset, size_t size) {
  switch (size) {
    case 1: return Load<uint8_t>(bytes, offset);
    case 2: return Load<uint16_t>(bytes, offset);
    case 4: return Load<uint32_t>(bytes, offset);
    default: return Load<uint64_t>(bytes, offset);
  }
}

class Decoder {
 public:
  Decoder(NvtxRegistry& registry, const NvtxDomain* domain)
      : registry_(registry), domain_(domain) {}

  // Adds the fields of one payload of `schema` to `out`.
  void DecodeInto(const PayloadSchema& schema, std::span<const std::byte> bytes, int depth,
                  nlohmann::json& out) {
    if (schema.type != NVTX_PAYLOAD_SCHEMA_TYPE_STATIC) {
      out[schema.name.empty() ? "payload" : schema.name] = nullptr;  // dynamic/union layouts
      return;
    }
    for (const PayloadEntry& entry : schema.entries) {
      if ((entry.flags & NVTX_PAYLOAD_ENTRY_FLAG_HIDE) != 0) continue;
      std::string key = entry.name.empty() ? "field" + std::to_string(&entry - schema.entries.data())
                                           : entry.name;
      out[key] = DecodeEntry(entry, bytes, depth);
    }
  }

 private:
  nlohmann::json DecodeEntry(const PayloadEntry& entry, std::span<const std::byte> bytes,
                             int depth) {
    if ((entry.flags & NVTX_PAYLOAD_ENTRY_FLAG_POINTER) != 0) return nullptr;  // not ours to follow
    uint64_t array_kind = entry.flags & NVTX_PAYLOAD_ENTRY_FLAG_IS_ARRAY;
    if (array_kind != 0 && array_kind != NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE) return nullptr;
    size_t count = array_kind != 0 ? entry.array_or_union_detail : 1;
    bool is_text = entry.type == NVTX_PAYLOAD_ENTRY_TYPE_CHAR ||
                   entry.type == NVTX_PAYLOAD_ENTRY_TYPE_CHAR8 ||
                   entry.type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING ||
                   entry.type == NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8;
    if (array_kind != 0 && is_text) {  // char[N] inline
      if (entry.offset >= bytes.size()) return nullptr;
      size_t available = std::min(count, bytes.size() - entry.offset);
      const char* text = reinterpret_cast<const char*>(bytes.data() + entry.offset);
      return std::string(text, strnlen(text, available));
    }
    if (entry.type == NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE) {
      if (entry.offset + 8 > bytes.size()) return nullptr;
      // Handles are our own never-freed NvtxString objects.
      const auto* handle = reinterpret_cast<const NvtxString*>(Load<uintptr_t>(bytes, entry.offset));
      return handle != nullptr ? nlohmann::json(handle->text) : nlohmann::json(nullptr);
    }
    if (array_kind == 0) return DecodeValue(entry.type, bytes, entry.offset, depth);
    nlohmann::json items = nlohmann::json::array();
    size_t stride = ElementSize(entry.type);
    if (stride == 0 || count > 4096) return nullptr;
    for (size_t i = 0; i < count; ++i) {
      items.push_back(DecodeValue(entry.type, bytes, entry.offset + i * stride, depth));
    }
    return items;
  }

  size_t ElementSize(uint64_t type) {
    if (type < NVTX_PAYLOAD_SCHEMA_ID_STATIC_START) return PayloadTypeLayout(type).first;
    if (const PayloadEnum* found = registry_.FindEnum(domain_, type)) return found->size;
    if (const PayloadSchema* nested = registry_.FindSchema(domain_, type)) return nested->static_size;
    return 0;
  }

  nlohmann::json DecodeValue(uint64_t type, std::span<const std::byte> bytes, size_t offset,
                             int depth) {
    if (type < NVTX_PAYLOAD_SCHEMA_ID_STATIC_START) return ReadScalar(type, bytes, offset);
    if (const PayloadEnum* found = registry_.FindEnum(domain_, type)) {
      if (found->size == 0 || found->size > 8 || offset + found->size > bytes.size()) return nullptr;
      uint64_t value = ReadUnsigned(bytes, offset, found->size);
      for (const auto& [number, name] : found->values) {
        if (number == value) return name;
      }
      return value;
    }
    const PayloadSchema* nested = registry_.FindSchema(domain_, type);
    if (nested == nullptr || depth >= kMaxNesting || offset > bytes.size()) return nullptr;
    nlohmann::json object = nlohmann::json::object();
    DecodeInto(*nested, bytes.subspan(offset), depth + 1, object);
    return object;
  }

  NvtxRegistry& registry_;
  const NvtxDomain* domain_;
};

}  // namespace

std::string PayloadsToJson(NvtxRegistry& registry, const NvtxDomain* domain,
                           std::span<const PayloadPiece> pieces, bool unfinished) {
  if (pieces.empty() && !unfinished) return {};
  nlohmann::json out = nlohmann::json::object();
  Decoder decoder(registry, domain);
  for (const PayloadPiece& piece : pieces) {
    const PayloadSchema* schema = registry.FindSchema(domain, piece.schema_id);
    if (schema == nullptr) {
      out["<schema " + std::to_string(piece.schema_id) + ">"] = nullptr;
      continue;
    }
    decoder.DecodeInto(*schema, piece.bytes, 0, out);
  }
  if (unfinished) out["rankscope.unfinished"] = true;
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<CollectivePayload> ReadCollectivePayload(NvtxRegistry& registry, const NvtxDomain* domain,
                                                       std::span<const PayloadPiece> pieces) {
  for (const PayloadPiece& piece : pieces) {
    const PayloadSchema* schema = registry.FindSchema(domain, piece.schema_id);
    if (schema == nullptr || schema->name != kCollectiveSchemaName) continue;
    nlohmann::json fields = nlohmann::json::object();
    Decoder(registry, domain).DecodeInto(*schema, piece.bytes, 0, fields);
    const auto integer = [&fields](const char* key) -> std::optional<int64_t> {
      const auto found = fields.find(key);
      if (found == fields.end() || !found->is_number_integer()) return std::nullopt;
      return found->get<int64_t>();  // uint64 fields keep their bits
    };
    const std::optional<int64_t> comm = integer("comm");
    const std::optional<int64_t> sequence = integer("sequence");
    if (!comm || !sequence) return std::nullopt;  // not the convention's two keys: not a collective
    CollectivePayload payload;
    payload.comm_hash = static_cast<uint64_t>(*comm);
    payload.sequence = static_cast<uint64_t>(*sequence);
    payload.bytes = static_cast<uint64_t>(integer("bytes").value_or(0));
    const auto small = [&integer](const char* key, int32_t fallback) {
      const int64_t value = integer(key).value_or(fallback);
      return value >= INT32_MIN && value <= INT32_MAX ? static_cast<int32_t>(value) : fallback;
    };
    payload.root = small("root", -1);
    payload.peer = small("peer", -1);
    payload.comm_rank = small("comm_rank", -1);
    payload.comm_size = std::max(0, small("comm_size", 0));
    return payload;
  }
  return std::nullopt;
}

}  // namespace rankscope::collector
