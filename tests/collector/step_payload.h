// The "rankscope step" NVTX payload schema (step, samples), as the trainer registers it, for
// the test programs that annotate as a trainer does.
#pragma once

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstddef>
#include <cstdint>

namespace rankscope::collector::testing {

struct StepPayload {
  uint64_t step;
  uint64_t samples;
};

// The schema's id in `domain`, for nvtxPayloadData_t.
inline uint64_t RegisterStepSchema(nvtxDomainHandle_t domain) {
  static const nvtxPayloadSchemaEntry_t entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "step", nullptr, 0, offsetof(StepPayload, step), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "samples", nullptr, 0, offsetof(StepPayload, samples), nullptr, nullptr},
  };
  nvtxPayloadSchemaAttr_t attr{};
  attr.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE;
  attr.name = "rankscope step";
  attr.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  attr.entries = entries;
  attr.numEntries = 2;
  attr.payloadStaticSize = sizeof(StepPayload);
  return nvtxPayloadSchemaRegister(domain, &attr);
}

}  // namespace rankscope::collector::testing
