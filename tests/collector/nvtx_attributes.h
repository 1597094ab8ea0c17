// An NVTX event's attributes as test programs pass them: an ASCII message and a category.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <cstdint>

namespace rankscope::testing {

inline nvtxEventAttributes_t NvtxAttributes(const char* name, uint32_t category) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.category = category;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  return attributes;
}

}  // namespace rankscope::testing
