#include "collector/nvtx_registry.h"

#include <nvtx3/nvToolsExtPayload.h>

#include <algorithm>

namespace rankscope::collector {

std::pair<size_t, size_t> PayloadTypeLayout(uint64_t type) {
  switch (type) {
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR: case NVTX_PAYLOAD_ENTRY_TYPE_UCHAR:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT8: case NVTX_PAYLOAD_ENTRY_TYPE_UINT8:
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR8: case NVTX_PAYLOAD_ENTRY_TYPE_BYTE:
      return {1, 1};
    case NVTX_PAYLOAD_ENTRY_TYPE_SHORT: case NVTX_PAYLOAD_ENTRY_TYPE_USHORT:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT16: case NVTX_PAYLOAD_ENTRY_TYPE_UINT16:
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR16: case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT16:
    case NVTX_PAYLOAD_ENTRY_TYPE_BF16:
      return {2, 2};
    case NVTX_PAYLOAD_ENTRY_TYPE_INT: case NVTX_PAYLOAD_ENTRY_TYPE_UINT:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT32: case NVTX_PAYLOAD_ENTRY_TYPE_UINT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT: case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_WCHAR: case NVTX_PAYLOAD_ENTRY_TYPE_CHAR32:
    case NVTX_PAYLOAD_ENTRY_TYPE_TF32: case NVTX_PAYLOAD_ENTRY_TYPE_CATEGORY:
    case NVTX_PAYLOAD_ENTRY_TYPE_COLOR_ARGB: case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT32:
      return {4, 4};
    case NVTX_PAYLOAD_ENTRY_TYPE_LONG: case NVTX_PAYLOAD_ENTRY_TYPE_ULONG:
    case NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG: case NVTX_PAYLOAD_ENTRY_TYPE_ULONGLONG:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT64: case NVTX_PAYLOAD_ENTRY_TYPE_UINT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE: case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_SIZE: case NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS:
    case NVTX_PAYLOAD_ENTRY_TYPE_SCOPE_ID: case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT64: case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8: case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF16:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF32:
    case NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE:
      return {8, 8};
    case NVTX_PAYLOAD_ENTRY_TYPE_LONGDOUBLE: case NVTX_PAYLOAD_ENTRY_TYPE_INT128:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT128: case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT128:
      return {16, 16};
    default:
      return {0, 0};
  }
}

const NvtxDomain* NvtxRegistry::CreateDomain(std::string_view name) {
  std::lock_guard lock(mutex_);
  for (const NvtxDomain& domain : domains_) {
    if (domain.name == name) return &domain;
  }
  bool enabled = name == "NCCL" ? selection_.nccl : selection_.nvtx;
  return &domains_.emplace_back(NvtxDomain{std::string(name), enabled});
}

const NvtxString* NvtxRegistry::RegisterString(const NvtxDomain* domain, std::string_view text) {
  std::lock_guard lock(mutex_);
  auto key = std::make_pair(domain, std::string(text));
  auto found = string_index_.find(key);
  if (found != string_index_.end()) return found->second;
  const NvtxString* added = &strings_.emplace_back(NvtxString{domain, key.second});
  string_index_.emplace(std::move(key), added);
  return added;
}

void NvtxRegistry::NameCategory(const NvtxDomain* domain, uint32_t category,
                                std::string_view name) {
  std::lock_guard lock(mutex_);
  categories_.emplace_back(domain != nullptr ? domain->name : "", category, std::string(name));
  category_count_.store(categories_.size(), std::memory_order_release);
}

std::vector<std::tuple<std::string, uint32_t, std::string>> NvtxRegistry::CategoriesFrom(size_t first) {
  if (category_count_.load(std::memory_order_acquire) <= first) return {};
  std::lock_guard lock(mutex_);
  return {categories_.begin() + static_cast<std::ptrdiff_t>(std::min(first, categories_.size())), categories_.end()};
}

size_t NvtxRegistry::SlotOf(const NvtxDomain* domain, uint64_t id) {
  uint64_t key = id * 0x9E3779B97F4A7C15ull ^ reinterpret_cast<uintptr_t>(domain);
  return static_cast<size_t>((key ^ (key >> 29)) % kSchemaSlots);
}

uint64_t NvtxRegistry::RegisterSchema(const NvtxDomain* domain, const PayloadSchema& description,
                                      std::optional<uint64_t> requested_id) {
  std::lock_guard lock(mutex_);
  uint64_t id = requested_id ? *requested_id : next_dynamic_id_++;
  PayloadSchema& schema = schemas_.emplace_back(description);
  schema.domain = domain;
  schema.id = id;
  // Resolve offsets the schema left to natural alignment, and the static size.
  size_t end = 0, max_align = 1;
  for (size_t i = 0; i < schema.entries.size(); ++i) {
    PayloadEntry& entry = schema.entries[i];
    auto [size, align] = PayloadTypeLayout(entry.type);
    if (entry.type >= NVTX_PAYLOAD_SCHEMA_ID_STATIC_START) {  // a nested schema or an enum
      size = 0;
      for (const PayloadSchema& other : schemas_) {
        if (other.domain == domain && other.id == entry.type) size = other.static_size;
      }
      for (const PayloadEnum& other : enums_) {
        if (other.domain == domain && other.id == entry.type) size = other.size;
      }
      align = (size == 1 || size == 2 || size == 4) ? size : 8;
    }
    size_t count = 1;
    if ((entry.flags & NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE) != 0 &&
        (entry.flags & NVTX_PAYLOAD_ENTRY_FLAG_IS_ARRAY) == NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE) {
      count = entry.array_or_union_detail;
    }
    if ((entry.flags & NVTX_PAYLOAD_ENTRY_FLAG_POINTER) != 0) size = 8, align = 8;
    if (align == 0) align = 1;
    if (i > 0 && entry.offset == 0) entry.offset = (end + align - 1) / align * align;
    end = std::max<size_t>(end, entry.offset + size * count);
    max_align = std::max(max_align, align);
  }
  schema.static_size = (end + max_align - 1) / max_align * max_align;
  if (description.static_size != 0) schema.static_size = description.static_size;
  for (size_t probe = 0; probe < kSchemaSlots; ++probe) {
    auto& slot = schema_slots_[(SlotOf(domain, id) + probe) % kSchemaSlots];
    if (slot.load(std::memory_order_relaxed) == nullptr) {
      slot.store(&schema, std::memory_order_release);
      break;
    }
  }
  return id;
}

uint64_t NvtxRegistry::RegisterEnum(const NvtxDomain* domain, const PayloadEnum& description,
                                    std::optional<uint64_t> requested_id) {
  std::lock_guard lock(mutex_);
  uint64_t id = requested_id ? *requested_id : next_dynamic_id_++;
  PayloadEnum& added = enums_.emplace_back(description);
  added.domain = domain;
  added.id = id;
  return id;
}

const PayloadSchema* NvtxRegistry::FindSchema(const NvtxDomain* domain, uint64_t id) const {
  for (size_t probe = 0; probe < kSchemaSlots; ++probe) {
    const PayloadSchema* schema =
        schema_slots_[(SlotOf(domain, id) + probe) % kSchemaSlots].load(std::memory_order_acquire);
    if (schema == nullptr) return nullptr;
    if (schema->domain == domain && schema->id == id) return schema;
  }
  return nullptr;
}

const PayloadEnum* NvtxRegistry::FindEnum(const NvtxDomain* domain, uint64_t id) {
  std::lock_guard lock(mutex_);
  // Newest first: a re-registration replaces the earlier description.
  for (auto it = enums_.rbegin(); it != enums_.rend(); ++it) {
    if (it->domain == domain && it->id == id) return &*it;
  }
  return nullptr;
}

}  // namespace rankscope::collector
