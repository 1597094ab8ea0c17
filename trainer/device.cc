#include "trainer/device.h"

#include "trainer/annotations.h"

namespace rankscope::trainer {
namespace {

// The memory counters' mark names, by MemoryCategory (string literals: MarkMemory keeps them).
constexpr const char* kMarkNames[kMemoryCategories] = {
    "memory: parameters", "memory: gradients",    "memory: optimizer",
    "memory: activations", "memory: comm buffers", "memory: data",
};
constexpr size_t kMarkPrefix = 8;  // "memory: "

}  // namespace

const char* MemoryCategoryName(MemoryCategory category) {
  return kMarkNames[static_cast<size_t>(category)] + kMarkPrefix;
}

Result<float*> ComputeDevice::Allocate(size_t count, MemoryCategory category) {
  RS_ASSIGN_OR_RETURN(float* data, AllocateFloats(count));
  Count(category, count * sizeof(float));
  return data;
}

Result<int32_t*> ComputeDevice::AllocateLabelsIn(size_t count, MemoryCategory category) {
  RS_ASSIGN_OR_RETURN(int32_t* data, AllocateLabels(count));
  Count(category, count * sizeof(int32_t));
  return data;
}

void ComputeDevice::Count(MemoryCategory category, uint64_t bytes) {
  uint64_t& total = allocated_[static_cast<size_t>(category)];
  total += bytes;
  MarkMemory(kMarkNames[static_cast<size_t>(category)], total);
}

}  // namespace rankscope::trainer
