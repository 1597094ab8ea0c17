// The "rankscope collective" NVTX payload schema, laid out as the trainer registers it
// (trainer/annotations.h), for the test programs that annotate their collectives.
#pragma once

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstddef>
#include <cstdint>

namespace rankscope::collector::testing {

struct CollectivePayload {
  uint64_t comm;
  uint64_t sequence;
  uint64_t bytes;
  int64_t root;
  int64_t peer;
  int64_t comm_rank;
  int64_t comm_size;
};

// The schema's id in `domain`, for nvtxPayloadData_t.
inline uint64_t RegisterCollectiveSchema(nvtxDomainHandle_t domain) {
  static const nvtxPayloadSchemaEntry_t entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "comm", nullptr, 0, offsetof(CollectivePayload, comm), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "sequence", nullptr, 0, offsetof(CollectivePayload, sequence), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", nullptr, 0, offsetof(CollectivePayload, bytes), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "root", nullptr, 0, offsetof(CollectivePayload, root), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "peer", nullptr, 0, offsetof(CollectivePayload, peer), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_rank", nullptr, 0, offsetof(CollectivePayload, comm_rank), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_size", nullptr, 0, offsetof(CollectivePayload, comm_size), nullptr,
       nullptr},
  };
  nvtxPayloadSchemaAttr_t attr{};
  attr.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE;
  attr.name = "rankscope collective";
  attr.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  attr.entries = entries;
  attr.numEntries = sizeof(entries) / sizeof(entries[0]);
  attr.payloadStaticSize = sizeof(CollectivePayload);
  return nvtxPayloadSchemaRegister(domain, &attr);
}

// Pushes a range named `op` in `domain` whose payload says it is `payload`'s collective.
inline void PushCollective(nvtxDomainHandle_t domain, uint64_t schema, const char* op,
                           const CollectivePayload& payload) {
  nvtxPayloadData_t data{schema, sizeof(payload), &payload};
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.payloadType = NVTX_PAYLOAD_TYPE_EXT;
  attributes.reserved0 = 1;  // one nvtxPayloadData_t
  attributes.payload.ullValue = reinterpret_cast<uint64_t>(&data);
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = op;
  nvtxDomainRangePushEx(domain, &attributes);
}

}  // namespace rankscope::collector::testing
