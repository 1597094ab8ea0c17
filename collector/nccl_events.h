// What one NCCL profiler-plugin callback leaves in a thread buffer: a fixed-size record (and
// a little text), copied on the calling thread and assembled into operations by the drain
// thread (collector/nccl_assembler.h).
#pragma once

#include <cstdint>

namespace rankscope::collector {

enum class NcclRecordKind : uint8_t {
  kComm = 1,   // a communicator started (plugin init); text: its name
  kStart = 2,  // an event started; text for operations: "func\0datatype\0algo\0proto\0comm_name"
               // (comm_name only in version 3, empty otherwise)
  kStop = 3,   // an event stopped
  kState = 4,  // an event changed state (a kernel channel's stop time, a step's bytes)
};

enum class NcclEventKind : uint8_t {
  kNone = 0,
  kColl = 1,
  kP2p = 2,
  kProxyOp = 3,
  kProxyStep = 4,
  kKernelChannel = 5,
};

struct NcclRecord {
  uint64_t id = 0;         // the event's handle; for kComm the communicator's id
  uint64_t parent = 0;     // the parent event's handle; 0 for none or another process's
  uint64_t comm = 0;       // the communicator's id (the plugin context)
  uint64_t comm_hash = 0;  // kComm; kStart of operations in plugin version 3
  uint64_t sequence = 0;   // collectives: NCCL's per-communicator sequence number
  uint64_t count = 0;      // operations: elements
  uint64_t value = 0;      // kernel channels: GPU timer; kState: GPU timer or bytes
  int32_t rank = -1;       // kComm: this rank in the communicator; kStart: the descriptor's rank
  int32_t ranks = 0;       // kComm: ranks in the communicator
  int32_t root = -1;       // collectives with a root
  int32_t peer = -1;       // point-to-point and proxy work
  int32_t channel = -1;    // proxy work and kernel channels
  int32_t channels = 0;    // operations: channels used
  int32_t step = -1;       // proxy steps: the step; proxy operations: steps planned
  int32_t state = -1;      // kState: NCCL's event state
  NcclRecordKind kind = NcclRecordKind::kStart;
  NcclEventKind event = NcclEventKind::kNone;
  uint8_t is_send = 0;     // proxy work
  uint8_t api_version = 0; // kComm: the plugin interface version NCCL chose
};

}  // namespace rankscope::collector
