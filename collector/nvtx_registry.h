// Process-wide NVTX objects. NVTX calls InitializeInjectionNvtx2 once per module (the app,
// libnccl, libtorch, ...) but handles travel between modules, so domains, registered
// strings, payload schemas and enums live here, once per process, and are never freed:
// a handle the application holds stays valid for its whole life.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "collector/rank_env.h"

namespace rankscope::collector {

struct NvtxDomain {
  std::string name;  // "" for the default domain
  bool enabled = true;
};

struct NvtxString {
  const NvtxDomain* domain = nullptr;
  std::string text;
};

struct PayloadEntry {
  uint64_t flags = 0;
  uint64_t type = 0;
  std::string name;
  uint64_t array_or_union_detail = 0;
  uint64_t offset = 0;  // resolved: natural alignment where the schema left it 0
};

struct PayloadSchema {
  const NvtxDomain* domain = nullptr;
  uint64_t id = 0;
  std::string name;
  uint64_t type = 0;  // NVTX_PAYLOAD_SCHEMA_TYPE_*
  std::vector<PayloadEntry> entries;
  size_t static_size = 0;  // bytes of one payload; 0 when not fixed
};

struct PayloadEnum {
  const NvtxDomain* domain = nullptr;
  uint64_t id = 0;
  std::string name;
  size_t size = 0;
  std::vector<std::pair<uint64_t, std::string>> values;
};

// Byte size and alignment of a payload entry type on this ABI; {0, 0} when unknown.
std::pair<size_t, size_t> PayloadTypeLayout(uint64_t type);

class NvtxRegistry {
 public:
  explicit NvtxRegistry(TraceSelection selection) : selection_(selection) {}

  const NvtxDomain* DefaultDomain() const { return &default_domain_; }
  // The same name gives the same domain. NCCL's domain follows the `nccl` trace item,
  // every other domain the `nvtx` item.
  const NvtxDomain* CreateDomain(std::string_view name);
  const NvtxString* RegisterString(const NvtxDomain* domain, std::string_view text);

  void NameCategory(const NvtxDomain* domain, uint32_t category, std::string_view name);
  // (domain name, category id, category name) in registration order, from the `first`-th
  // naming on. Lock-free when nothing was named since: the drain thread asks every pass.
  std::vector<std::tuple<std::string, uint32_t, std::string>> CategoriesFrom(size_t first);

  // Static and dynamic schemas. Returns the schema id (the requested one when given,
  // otherwise a fresh dynamic id); 0 when the description is unusable.
  uint64_t RegisterSchema(const NvtxDomain* domain, const PayloadSchema& description,
                          std::optional<uint64_t> requested_id);
  uint64_t RegisterEnum(const NvtxDomain* domain, const PayloadEnum& description,
                        std::optional<uint64_t> requested_id);

  // Lock-free; safe on application threads.
  const PayloadSchema* FindSchema(const NvtxDomain* domain, uint64_t id) const;
  const PayloadEnum* FindEnum(const NvtxDomain* domain, uint64_t id);

 private:
  static constexpr size_t kSchemaSlots = 1024;
  static size_t SlotOf(const NvtxDomain* domain, uint64_t id);

  TraceSelection selection_;
  NvtxDomain default_domain_{"", true};
  std::mutex mutex_;
  std::deque<NvtxDomain> domains_;
  std::deque<NvtxString> strings_;
  std::map<std::pair<const NvtxDomain*, std::string>, const NvtxString*> string_index_;
  std::deque<PayloadSchema> schemas_;
  std::array<std::atomic<const PayloadSchema*>, kSchemaSlots> schema_slots_{};
  std::deque<PayloadEnum> enums_;
  std::vector<std::tuple<std::string, uint32_t, std::string>> categories_;
  std::atomic<size_t> category_count_{0};  // categories_.size(), readable without the mutex
  uint64_t next_dynamic_id_ = uint64_t{1} << 32;  // NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START
};

}  // namespace rankscope::collector
