#include "collector/nvtx_handlers.h"

#include <nvtx3/nvToolsExtSync.h>

#include <array>
#include <cstring>
#include <cwchar>
#include <string>

#include "collector/no_throw.h"
#include "collector/recorder.h"

namespace rankscope::collector {
namespace {

Recorder* g_recorder = nullptr;

constexpr size_t kMaxPieces = 8;

// Wide strings become UTF-8; NVTX's W variants are rare, so this may allocate.
std::string Utf8(const wchar_t* text) {
  std::string out;
  if (text == nullptr) return out;
  for (; *text != L'\0' && out.size() < 4096; ++text) {
    auto c = static_cast<uint32_t>(*text);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x110000) {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
    }
  }
  return out;
}

const NvtxDomain* AsDomain(nvtxDomainHandle_t domain) {
  return domain != nullptr ? reinterpret_cast<const NvtxDomain*>(domain)
                           : g_recorder->registry().DefaultDomain();
}

bool Enabled(const NvtxDomain* domain) { return g_recorder->recording() && domain->enabled; }

// Copies borrowed payload descriptors into pieces; sizes come from the call or, when the
// caller left them unknown, from the registered schema.
size_t CollectPieces(const NvtxDomain* domain, const nvtxPayloadData_t* data, size_t count,
                     std::array<PayloadPiece, kMaxPieces>& out) {
  size_t n = 0;
  for (size_t i = 0; data != nullptr && i < count && n < kMaxPieces; ++i) {
    size_t size = data[i].size;
    if (size == SIZE_MAX || size == 0) {
      const PayloadSchema* schema = g_recorder->registry().FindSchema(domain, data[i].schemaId);
      size = schema != nullptr ? schema->static_size : 0;
    }
    if (data[i].payload == nullptr) size = 0;
    out[n++] = PayloadPiece{data[i].schemaId,
                            std::span(static_cast<const std::byte*>(data[i].payload), size)};
  }
  return n;
}

// Fills `draft` from event attributes. `wide` receives the UTF-8 copy of a wide message.
void FromAttributes(const nvtxEventAttributes_t* attributes, const NvtxDomain* domain,
                    EventDraft& draft, std::string& wide,
                    std::array<PayloadPiece, kMaxPieces>& pieces) {
  draft.domain = domain;
  if (attributes == nullptr) return;
  draft.category = attributes->category;
  if (attributes->colorType == NVTX_COLOR_ARGB) draft.color = attributes->color;
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      if (attributes->message.ascii != nullptr) draft.text = attributes->message.ascii;
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      wide = Utf8(attributes->message.unicode);
      draft.text = wide;
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      draft.registered = reinterpret_cast<const NvtxString*>(attributes->message.registered);
      break;
    default:
      break;
  }
  switch (attributes->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
    case NVTX_PAYLOAD_TYPE_INT64:
    case NVTX_PAYLOAD_TYPE_DOUBLE:
      draft.payload_kind = static_cast<trace::PayloadKind>(attributes->payloadType);
      draft.payload_bits = attributes->payload.ullValue;
      break;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
    case NVTX_PAYLOAD_TYPE_INT32:
    case NVTX_PAYLOAD_TYPE_FLOAT:
      draft.payload_kind = static_cast<trace::PayloadKind>(attributes->payloadType);
      draft.payload_bits = attributes->payload.uiValue;
      break;
    case NVTX_PAYLOAD_TYPE_EXT: {
      const auto* data = reinterpret_cast<const nvtxPayloadData_t*>(attributes->payload.ullValue);
      size_t count = attributes->reserved0 > 0 ? static_cast<size_t>(attributes->reserved0) : 0;
      draft.pieces = std::span(pieces.data(), CollectPieces(domain, data, count, pieces));
      break;
    }
    default:
      break;
  }
}

EventDraft TextDraft(const NvtxDomain* domain, const char* text) {
  EventDraft draft;
  draft.domain = domain;
  if (text != nullptr) draft.text = text;
  return draft;
}

// ---- CORE (default domain) ----

void DomainMarkEx(nvtxDomainHandle_t handle, const nvtxEventAttributes_t* attributes);
void MarkEx(const nvtxEventAttributes_t* attributes) { DomainMarkEx(nullptr, attributes); }
void MarkA(const char* message) {
  const NvtxDomain* domain = AsDomain(nullptr);
  if (Enabled(domain)) g_recorder->Mark(TextDraft(domain, message));
}
void MarkW(const wchar_t* message) {
  const NvtxDomain* domain = AsDomain(nullptr);
  if (!Enabled(domain)) return;
  std::string text = Utf8(message);
  g_recorder->Mark(TextDraft(domain, text.c_str()));
}

nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t handle, const nvtxEventAttributes_t* attributes) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain)) return 0;
  EventDraft draft;
  std::string wide;
  std::array<PayloadPiece, kMaxPieces> pieces;
  FromAttributes(attributes, domain, draft, wide, pieces);
  return g_recorder->Start(draft);
}
nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t* attributes) {
  return DomainRangeStartEx(nullptr, attributes);
}
nvtxRangeId_t RangeStartA(const char* message) {
  const NvtxDomain* domain = AsDomain(nullptr);
  return Enabled(domain) ? g_recorder->Start(TextDraft(domain, message)) : 0;
}
nvtxRangeId_t RangeStartW(const wchar_t* message) {
  const NvtxDomain* domain = AsDomain(nullptr);
  if (!Enabled(domain)) return 0;
  std::string text = Utf8(message);
  return g_recorder->Start(TextDraft(domain, text.c_str()));
}
void DomainRangeEnd(nvtxDomainHandle_t handle, nvtxRangeId_t id) {
  const NvtxDomain* domain = AsDomain(handle);
  if (Enabled(domain) && id != 0) g_recorder->End(domain, id, {});
}
void RangeEnd(nvtxRangeId_t id) { DomainRangeEnd(nullptr, id); }

// Attributes the recorder's fast push takes: no payload, a message that needs no conversion.
bool ArePlain(const nvtxEventAttributes_t* attributes, Recorder::PlainAttributes& plain) {
  if (attributes == nullptr) return true;
  if (attributes->payloadType != NVTX_PAYLOAD_UNKNOWN) return false;
  if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    plain.message = attributes->message.ascii;
  } else if (attributes->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    plain.registered = reinterpret_cast<const NvtxString*>(attributes->message.registered);
  } else if (attributes->messageType != NVTX_MESSAGE_UNKNOWN) {
    return false;
  }
  plain.category = attributes->category;
  if (attributes->colorType == NVTX_COLOR_ARGB) plain.color = attributes->color;
  return true;
}

int DomainRangePushEx(nvtxDomainHandle_t handle, const nvtxEventAttributes_t* attributes) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain)) return NVTX_NO_PUSH_POP_TRACKING;
  if (Recorder::PlainAttributes plain; ArePlain(attributes, plain)) return g_recorder->PushPlain(domain, plain);
  EventDraft draft;
  std::string wide;
  std::array<PayloadPiece, kMaxPieces> pieces;
  FromAttributes(attributes, domain, draft, wide, pieces);
  return g_recorder->Push(draft);
}
int RangePushEx(const nvtxEventAttributes_t* attributes) { return DomainRangePushEx(nullptr, attributes); }
int RangePushA(const char* message) {
  const NvtxDomain* domain = AsDomain(nullptr);
  return Enabled(domain) ? g_recorder->PushPlain(domain, {.message = message}) : NVTX_NO_PUSH_POP_TRACKING;
}
int RangePushW(const wchar_t* message) {
  const NvtxDomain* domain = AsDomain(nullptr);
  if (!Enabled(domain)) return NVTX_NO_PUSH_POP_TRACKING;
  std::string text = Utf8(message);
  return g_recorder->Push(TextDraft(domain, text.c_str()));
}
int DomainRangePop(nvtxDomainHandle_t handle) {
  const NvtxDomain* domain = AsDomain(handle);
  return Enabled(domain) ? g_recorder->PopPlain(domain) : NVTX_NO_PUSH_POP_TRACKING;
}
int RangePop() {
  const NvtxDomain* domain = AsDomain(nullptr);
  return Enabled(domain) ? g_recorder->PopPlain(domain) : NVTX_NO_PUSH_POP_TRACKING;
}

void DomainNameCategoryA(nvtxDomainHandle_t handle, uint32_t category, const char* name) {
  if (name != nullptr) g_recorder->registry().NameCategory(AsDomain(handle), category, name);
}
void DomainNameCategoryW(nvtxDomainHandle_t handle, uint32_t category, const wchar_t* name) {
  g_recorder->registry().NameCategory(AsDomain(handle), category, Utf8(name));
}
void NameCategoryA(uint32_t category, const char* name) { DomainNameCategoryA(nullptr, category, name); }
void NameCategoryW(uint32_t category, const wchar_t* name) { DomainNameCategoryW(nullptr, category, name); }
void NameOsThreadA(uint32_t tid, const char* name) {
  if (name != nullptr) g_recorder->NameThread(tid, name);
}
void NameOsThreadW(uint32_t tid, const wchar_t* name) { g_recorder->NameThread(tid, Utf8(name)); }

// ---- CORE2 (domains, registered strings) ----

nvtxDomainHandle_t DomainCreateA(const char* name) {
  const NvtxDomain* domain = g_recorder->registry().CreateDomain(name != nullptr ? name : "");
  return reinterpret_cast<nvtxDomainHandle_t>(const_cast<NvtxDomain*>(domain));
}
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) { return DomainCreateA(Utf8(name).c_str()); }
void DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: events may still be in flight
nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t handle, const char* text) {
  const NvtxString* registered =
      g_recorder->registry().RegisterString(AsDomain(handle), text != nullptr ? text : "");
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<NvtxString*>(registered));
}
nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t handle, const wchar_t* text) {
  return DomainRegisterStringA(handle, Utf8(text).c_str());
}
void DomainMarkEx(nvtxDomainHandle_t handle, const nvtxEventAttributes_t* attributes) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain)) return;
  EventDraft draft;
  std::string wide;
  std::array<PayloadPiece, kMaxPieces> pieces;
  FromAttributes(attributes, domain, draft, wide, pieces);
  g_recorder->Mark(draft);
}
// Resources (naming of pointers/handles) are not recorded; a non-null handle keeps
// callers that check it happy.
nvtxResourceHandle_t DomainResourceCreate(nvtxDomainHandle_t, nvtxResourceAttributes_t*) {
  static char resource_token;
  return reinterpret_cast<nvtxResourceHandle_t>(&resource_token);
}
void DomainResourceDestroy(nvtxResourceHandle_t) {}
void Initialize(const void*) {}

// ---- payload extension ----

uint64_t SchemaRegister(nvtxDomainHandle_t handle, const nvtxPayloadSchemaAttr_t* attr) {
  if (attr == nullptr) return 0;
  PayloadSchema schema;
  if ((attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME) != 0 && attr->name != nullptr) {
    schema.name = attr->name;
  }
  schema.type = (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE) != 0 ? attr->type
                                                                          : NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  if ((attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES) != 0 && attr->entries != nullptr) {
    size_t count = (attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) != 0
                       ? attr->numEntries : 0;
    for (size_t i = 0; i < count && i < 1024; ++i) {
      const nvtxPayloadSchemaEntry_t& entry = attr->entries[i];
      schema.entries.push_back(PayloadEntry{entry.flags, entry.type,
                                            entry.name != nullptr ? entry.name : "",
                                            entry.arrayOrUnionDetail, entry.offset});
    }
  }
  if ((attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE) != 0) {
    schema.static_size = attr->payloadStaticSize;
  }
  std::optional<uint64_t> id;
  if ((attr->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID) != 0) id = attr->schemaId;
  return g_recorder->registry().RegisterSchema(AsDomain(handle), schema, id);
}

uint64_t EnumRegister(nvtxDomainHandle_t handle, const nvtxPayloadEnumAttr_t* attr) {
  if (attr == nullptr) return 0;
  PayloadEnum described;
  if (attr->name != nullptr) described.name = attr->name;
  described.size = attr->sizeOfEnum;
  for (size_t i = 0; attr->entries != nullptr && i < attr->numEntries && i < 4096; ++i) {
    const nvtxPayloadEnum_t& entry = attr->entries[i];
    described.values.emplace_back(entry.value, entry.name != nullptr ? entry.name : "");
  }
  std::optional<uint64_t> id;
  if ((attr->fieldMask & NVTX_PAYLOAD_ENUM_ATTR_FIELD_SCHEMA_ID) != 0) id = attr->schemaId;
  return g_recorder->registry().RegisterEnum(AsDomain(handle), described, id);
}

EventDraft PayloadDraft(const NvtxDomain* domain, const nvtxPayloadData_t* data, size_t count,
                        std::array<PayloadPiece, kMaxPieces>& pieces) {
  EventDraft draft;
  draft.domain = domain;
  draft.pieces = std::span(pieces.data(), CollectPieces(domain, data, count, pieces));
  return draft;
}

void MarkPayload(nvtxDomainHandle_t handle, const nvtxPayloadData_t* data, size_t count) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain)) return;
  std::array<PayloadPiece, kMaxPieces> pieces;
  g_recorder->Mark(PayloadDraft(domain, data, count, pieces));
}
int RangePushPayload(nvtxDomainHandle_t handle, const nvtxPayloadData_t* data, size_t count) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain)) return NVTX_NO_PUSH_POP_TRACKING;
  std::array<PayloadPiece, kMaxPieces> pieces;
  return g_recorder->Push(PayloadDraft(domain, data, count, pieces));
}
int RangePopPayload(nvtxDomainHandle_t handle, const nvtxPayloadData_t* data, size_t count) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain)) return NVTX_NO_PUSH_POP_TRACKING;
  std::array<PayloadPiece, kMaxPieces> pieces;
  return g_recorder->Pop(domain, std::span(pieces.data(), CollectPieces(domain, data, count, pieces)));
}
nvtxRangeId_t RangeStartPayload(nvtxDomainHandle_t handle, const nvtxPayloadData_t* data, size_t count) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain)) return 0;
  std::array<PayloadPiece, kMaxPieces> pieces;
  return g_recorder->Start(PayloadDraft(domain, data, count, pieces));
}
void RangeEndPayload(nvtxDomainHandle_t handle, nvtxRangeId_t id, const nvtxPayloadData_t* data,
                     size_t count) {
  const NvtxDomain* domain = AsDomain(handle);
  if (!Enabled(domain) || id == 0) return;
  std::array<PayloadPiece, kMaxPieces> pieces;
  g_recorder->End(domain, id, std::span(pieces.data(), CollectPieces(domain, data, count, pieces)));
}
uint8_t DomainIsEnabled(nvtxDomainHandle_t handle) { return Enabled(AsDomain(handle)) ? 1 : 0; }

// Fills slot `id` with Function behind the collector's exception barrier.
template <auto Function>
void Set(NvtxFunctionTable table, unsigned size, unsigned id) {
  if (id < size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(&NoThrow<Function>::Call);
  }
}

// The payload extension's slot `id`, likewise.
template <auto Function>
void Put(nvtxExtModuleSegment_t& segment, size_t id) {
  if (segment.functionSlots != nullptr && id < segment.slotCount) {
    segment.functionSlots[id] = reinterpret_cast<intptr_t>(&NoThrow<Function>::Call);
  }
}

}  // namespace

void SetNvtxRecorder(Recorder* recorder) { g_recorder = recorder; }

int InstallNvtxHandlers(NvtxGetExportTableFunc_t get_export_table) {
  if (g_recorder == nullptr || get_export_table == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  if (const auto* version =
          static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
      version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || table == nullptr) {
    return 0;
  }
  Set<&MarkEx>(table, size, NVTX_CBID_CORE_MarkEx);
  Set<&MarkA>(table, size, NVTX_CBID_CORE_MarkA);
  Set<&MarkW>(table, size, NVTX_CBID_CORE_MarkW);
  Set<&RangeStartEx>(table, size, NVTX_CBID_CORE_RangeStartEx);
  Set<&RangeStartA>(table, size, NVTX_CBID_CORE_RangeStartA);
  Set<&RangeStartW>(table, size, NVTX_CBID_CORE_RangeStartW);
  Set<&RangeEnd>(table, size, NVTX_CBID_CORE_RangeEnd);
  Set<&RangePushEx>(table, size, NVTX_CBID_CORE_RangePushEx);
  Set<&RangePushA>(table, size, NVTX_CBID_CORE_RangePushA);
  Set<&RangePushW>(table, size, NVTX_CBID_CORE_RangePushW);
  Set<&RangePop>(table, size, NVTX_CBID_CORE_RangePop);
  Set<&NameCategoryA>(table, size, NVTX_CBID_CORE_NameCategoryA);
  Set<&NameCategoryW>(table, size, NVTX_CBID_CORE_NameCategoryW);
  Set<&NameOsThreadA>(table, size, NVTX_CBID_CORE_NameOsThreadA);
  Set<&NameOsThreadW>(table, size, NVTX_CBID_CORE_NameOsThreadW);
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) != 0 && table != nullptr) {
    Set<&DomainMarkEx>(table, size, NVTX_CBID_CORE2_DomainMarkEx);
    Set<&DomainRangeStartEx>(table, size, NVTX_CBID_CORE2_DomainRangeStartEx);
    Set<&DomainRangeEnd>(table, size, NVTX_CBID_CORE2_DomainRangeEnd);
    Set<&DomainRangePushEx>(table, size, NVTX_CBID_CORE2_DomainRangePushEx);
    Set<&DomainRangePop>(table, size, NVTX_CBID_CORE2_DomainRangePop);
    Set<&DomainResourceCreate>(table, size, NVTX_CBID_CORE2_DomainResourceCreate);
    Set<&DomainResourceDestroy>(table, size, NVTX_CBID_CORE2_DomainResourceDestroy);
    Set<&DomainNameCategoryA>(table, size, NVTX_CBID_CORE2_DomainNameCategoryA);
    Set<&DomainNameCategoryW>(table, size, NVTX_CBID_CORE2_DomainNameCategoryW);
    Set<&DomainRegisterStringA>(table, size, NVTX_CBID_CORE2_DomainRegisterStringA);
    Set<&DomainRegisterStringW>(table, size, NVTX_CBID_CORE2_DomainRegisterStringW);
    Set<&DomainCreateA>(table, size, NVTX_CBID_CORE2_DomainCreateA);
    Set<&DomainCreateW>(table, size, NVTX_CBID_CORE2_DomainCreateW);
    Set<&DomainDestroy>(table, size, NVTX_CBID_CORE2_DomainDestroy);
    Set<&Initialize>(table, size, NVTX_CBID_CORE2_Initialize);
  }
  return 1;
}

int InstallNvtxPayloadExtension(nvtxExtModuleInfo_t* module_info) {
  if (g_recorder == nullptr || module_info == nullptr) return 0;
  if (module_info->moduleId != NVTX_EXT_PAYLOAD_MODULEID) return 0;  // counters, memory: not ours
  // Header versions differ in compatId (NCCL 2.28 bundles 0x0103, CUDA 13 has 0x0104); the
  // slots we fill are the same in both, so accept any 0x01xx and check the slot count.
  if ((module_info->compatId & 0xFF00) != 0x0100) return 0;
  if (module_info->segmentsCount < 1 || module_info->segments == nullptr) return 0;
  nvtxExtModuleSegment_t& segment = module_info->segments[0];
  Put<&SchemaRegister>(segment, NVTX3EXT_CBID_nvtxPayloadSchemaRegister);
  Put<&EnumRegister>(segment, NVTX3EXT_CBID_nvtxPayloadEnumRegister);
  Put<&MarkPayload>(segment, NVTX3EXT_CBID_nvtxMarkPayload);
  Put<&RangePushPayload>(segment, NVTX3EXT_CBID_nvtxRangePushPayload);
  Put<&RangePopPayload>(segment, NVTX3EXT_CBID_nvtxRangePopPayload);
  Put<&RangeStartPayload>(segment, NVTX3EXT_CBID_nvtxRangeStartPayload);
  Put<&RangeEndPayload>(segment, NVTX3EXT_CBID_nvtxRangeEndPayload);
  Put<&DomainIsEnabled>(segment, NVTX3EXT_CBID_nvtxDomainIsEnabled);
  return 1;
}

}  // namespace rankscope::collector
