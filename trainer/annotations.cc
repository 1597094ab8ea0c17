#include "trainer/annotations.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <iterator>
#include <string>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

namespace rankscope::trainer {
namespace {

// The schema's field offsets are CollectiveFields' own; eight 8-byte fields, no padding.
static_assert(sizeof(CollectiveFields) == 8 * sizeof(uint64_t));

struct StepPayload {
  uint64_t step;
  uint64_t samples;
};

struct AllReducePayload {
  uint64_t bucket;
  uint64_t bytes;
};

struct Annotations {
  nvtxDomainHandle_t domain = nullptr;
  uint64_t step_schema = 0;
  uint64_t allreduce_schema = 0;
  uint64_t workload_schema = 0;
  uint64_t collective_schema = 0;
  uint64_t micro_batch_schema = 0;
  uint64_t memory_schema = 0;
};

Annotations& State() {
  static Annotations state;
  return state;
}

uint64_t RegisterSchema(nvtxDomainHandle_t domain, const char* name, const nvtxPayloadSchemaEntry_t* entries,
                        size_t count, size_t size) {
  nvtxPayloadSchemaAttr_t attr{};
  attr.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE;
  attr.name = name;
  attr.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
  attr.entries = entries;
  attr.numEntries = count;
  attr.payloadStaticSize = size;
  return nvtxPayloadSchemaRegister(domain, &attr);
}

nvtxEventAttributes_t Attributes(const char* name, RangeCategory category) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.category = static_cast<uint32_t>(category);
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  return attributes;
}

// NVTX copies (or the tool consumes) the payload during the call, so stack storage is fine.
template <typename Payload>
void WithPayload(const char* name, RangeCategory category, uint64_t schema, const Payload& payload,
                 void (*emit)(nvtxDomainHandle_t, const nvtxEventAttributes_t*)) {
  nvtxPayloadData_t data{schema, sizeof(Payload), &payload};
  nvtxEventAttributes_t attributes = Attributes(name, category);
  attributes.payloadType = NVTX_PAYLOAD_TYPE_EXT;
  attributes.reserved0 = 1;  // one nvtxPayloadData_t
  attributes.payload.ullValue = reinterpret_cast<uint64_t>(&data);
  emit(State().domain, &attributes);
}

void PushRange(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  nvtxDomainRangePushEx(domain, attributes);
}

void Mark(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) { nvtxDomainMarkEx(domain, attributes); }

}  // namespace

void InitAnnotations() {
  Annotations& state = State();
  if (state.domain != nullptr) return;
  state.domain = nvtxDomainCreateA("rankscope");
  nvtxDomainNameCategoryA(state.domain, static_cast<uint32_t>(RangeCategory::kCompute), "compute");
  nvtxDomainNameCategoryA(state.domain, static_cast<uint32_t>(RangeCategory::kComm), "comm");
  static const nvtxPayloadSchemaEntry_t step_entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "step", nullptr, 0, offsetof(StepPayload, step), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "samples", nullptr, 0, offsetof(StepPayload, samples), nullptr, nullptr},
  };
  static const nvtxPayloadSchemaEntry_t allreduce_entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bucket", nullptr, 0, offsetof(AllReducePayload, bucket), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", nullptr, 0, offsetof(AllReducePayload, bytes), nullptr, nullptr},
  };
  state.step_schema = RegisterSchema(state.domain, "rankscope step", step_entries, 2, sizeof(StepPayload));
  state.allreduce_schema =
      RegisterSchema(state.domain, "rankscope allreduce", allreduce_entries, 2, sizeof(AllReducePayload));
  static const nvtxPayloadSchemaEntry_t workload_entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "world_size", nullptr, 0, offsetof(Workload, world_size), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "batch", nullptr, 0, offsetof(Workload, batch), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "accum", nullptr, 0, offsetof(Workload, accum), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "steps", nullptr, 0, offsetof(Workload, steps), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "parameters", nullptr, 0, offsetof(Workload, parameters), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "parallel", nullptr, 0, offsetof(Workload, parallel), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "stages", nullptr, 0, offsetof(Workload, stages), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "micro_batches", nullptr, 0, offsetof(Workload, micro_batches), nullptr,
       nullptr},
  };
  state.workload_schema = RegisterSchema(state.domain, "rankscope workload", workload_entries,
                                         std::size(workload_entries), sizeof(Workload));
  static const nvtxPayloadSchemaEntry_t collective_entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "comm", nullptr, 0, offsetof(CollectiveFields, comm), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "sequence", nullptr, 0, offsetof(CollectiveFields, sequence), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", nullptr, 0, offsetof(CollectiveFields, bytes), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "root", nullptr, 0, offsetof(CollectiveFields, root), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "peer", nullptr, 0, offsetof(CollectiveFields, peer), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_rank", nullptr, 0, offsetof(CollectiveFields, comm_rank), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "comm_size", nullptr, 0, offsetof(CollectiveFields, comm_size), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "bucket", nullptr, 0, offsetof(CollectiveFields, bucket), nullptr,
       nullptr},
  };
  state.collective_schema = RegisterSchema(state.domain, "rankscope collective", collective_entries,
                                           std::size(collective_entries), sizeof(CollectiveFields));
  static const nvtxPayloadSchemaEntry_t micro_batch_entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "stage", nullptr, 0, offsetof(MicroBatchFields, stage), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "stages", nullptr, 0, offsetof(MicroBatchFields, stages), nullptr, nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "micro_batch", nullptr, 0, offsetof(MicroBatchFields, micro_batch), nullptr,
       nullptr},
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "micro_batches", nullptr, 0, offsetof(MicroBatchFields, micro_batches),
       nullptr, nullptr},
  };
  static const nvtxPayloadSchemaEntry_t memory_entries[] = {
      {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", nullptr, 0, 0, nullptr, nullptr},
  };
  state.memory_schema = RegisterSchema(state.domain, "rankscope memory", memory_entries, 1, sizeof(uint64_t));
  state.micro_batch_schema = RegisterSchema(state.domain, "rankscope micro-batch", micro_batch_entries,
                                            std::size(micro_batch_entries), sizeof(MicroBatchFields));
}

void NameThisThread(const char* name) {
  pthread_setname_np(pthread_self(), name);
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), name);
}

ScopedRange::ScopedRange(const char* name, RangeCategory category) {
  nvtxEventAttributes_t attributes = Attributes(name, category);
  nvtxDomainRangePushEx(State().domain, &attributes);
}

ScopedRange::~ScopedRange() { nvtxDomainRangePop(State().domain); }

void MarkWorkload(const Workload& workload) {
  WithPayload("workload", RangeCategory::kNone, State().workload_schema, workload, Mark);
}

void MarkMemory(const char* name, uint64_t bytes) {
  WithPayload(name, RangeCategory::kNone, State().memory_schema, bytes, Mark);
}

StepRange::StepRange(uint64_t step, uint64_t samples) {
  WithPayload("step", RangeCategory::kNone, State().step_schema, StepPayload{step, samples}, PushRange);
}

StepRange::~StepRange() { nvtxDomainRangePop(State().domain); }

AllReduceRange::AllReduceRange(uint64_t bucket, uint64_t bytes, RangeCategory category) {
  WithPayload("allreduce", category, State().allreduce_schema, AllReducePayload{bucket, bytes}, PushRange);
}

AllReduceRange::~AllReduceRange() { nvtxDomainRangePop(State().domain); }

PassRange::PassRange(const char* name, const MicroBatchFields* fields) {
  if (fields == nullptr) {
    nvtxEventAttributes_t attributes = Attributes(name, RangeCategory::kNone);
    nvtxDomainRangePushEx(State().domain, &attributes);
  } else {
    WithPayload(name, RangeCategory::kNone, State().micro_batch_schema, *fields, PushRange);
  }
}

PassRange::~PassRange() { nvtxDomainRangePop(State().domain); }

CollectiveRange::CollectiveRange(const char* op, const CollectiveFields& fields, RangeCategory category) {
  WithPayload(op, category, State().collective_schema, fields, PushRange);
}

CollectiveRange::~CollectiveRange() { nvtxDomainRangePop(State().domain); }

}  // namespace rankscope::trainer
