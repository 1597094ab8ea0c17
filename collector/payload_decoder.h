// Turns NVTX extended payloads (binary blobs described by registered schemas) into a JSON
// object for the `args` column: NCCL's communicator/size/op payloads, the trainer's step
// payload, or any static schema of scalars, enums, fixed arrays and nested schemas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "collector/nvtx_registry.h"

namespace rankscope::collector {

struct PayloadPiece {
  uint64_t schema_id = 0;
  std::span<const std::byte> bytes;  // copied from the application at call time
};

// One JSON object with the fields of every piece, later pieces overriding earlier keys.
// Unknown schemas and fields that cannot be read safely (pointers, unions) appear as
// "<schema N>": null or "<field>": null rather than as guesses. `unfinished` adds
// "rankscope.unfinished": true. Returns "" when there is nothing to say.
std::string PayloadsToJson(NvtxRegistry& registry, const NvtxDomain* domain,
                           std::span<const PayloadPiece> pieces, bool unfinished);

}  // namespace rankscope::collector
