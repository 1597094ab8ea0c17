// Turns NVTX extended payloads (binary blobs described by registered schemas) into a JSON
// object for the `args` column: NCCL's communicator/size/op payloads, the trainer's step
// payload, or any static schema of scalars, enums, fixed arrays and nested schemas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

// The NVTX convention by which a program tells the collector that a range is a collective
// (collector/README.md, "Collectives from NVTX ranges"): an extended payload of a static
// schema named `rankscope collective` with integer fields `comm` and `sequence` (and
// optionally `bytes`, `root`, `peer`, `comm_rank`, `comm_size`); the range's message names
// the op.
inline constexpr const char* kCollectiveSchemaName = "rankscope collective";

struct CollectivePayload {
  uint64_t comm_hash = 0;
  uint64_t sequence = 0;
  uint64_t bytes = 0;
  int32_t root = -1;
  int32_t peer = -1;
  int32_t comm_rank = -1;
  int32_t comm_size = 0;
};

// The first piece of that schema, decoded; nullopt when there is none or it lacks `comm` or
// `sequence`.
std::optional<CollectivePayload> ReadCollectivePayload(NvtxRegistry& registry, const NvtxDomain* domain,
                                                       std::span<const PayloadPiece> pieces);

}  // namespace rankscope::collector
