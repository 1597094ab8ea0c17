// The NCCL profiler plugin's callbacks (interface versions 5, 4 and 3). The injected
// library exports them as `ncclProfiler_v5`, `_v4` and `_v3`; `rankscope profile` points
// NCCL_PROFILER_PLUGIN at it. Each callback copies what it is told into the calling
// thread's buffer and returns: no locks, no allocation after a thread's first event.
//
// Event handles given to NCCL are numbers, not pointers: a thread serial, a per-thread
// count and the event kind. Nothing NCCL hands back is ever dereferenced, so a parent handle
// from another process (PXN proxy work) is harmless.
#pragma once

#include <cstdint>

#include "collector/nccl_events.h"
#include "collector/nccl_profiler_abi.h"

namespace rankscope::collector {

class Recorder;

// The recorder the plugin records through; set at start-up, before NCCL can call.
void SetNcclRecorder(Recorder* recorder);

// The events the plugin asks NCCL for: operations, kernel channels, proxy operations and,
// unless RANKSCOPE_NCCL_PROXY_STEPS=0, single proxy steps.
int NcclActivationMask();

// The NCCL version that first offered each interface version (NCCL_VERSION_CODE).
inline constexpr int kNcclVersionForV5 = 22800;
inline constexpr int kNcclVersionForV4 = 22700;
inline constexpr int kNcclVersionForV3 = 22600;

// The kind a handle was made for (NcclEventKind::kNone for foreign or null handles).
NcclEventKind NcclHandleKind(const void* handle);

nccl_abi::Result NcclInitV5(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name, int nodes,
                            int ranks, int rank, nccl_abi::Logger log);
nccl_abi::Result NcclInitV4(void** context, int* activation_mask, const char* comm_name, uint64_t comm_hash, int nodes,
                            int ranks, int rank, nccl_abi::Logger log);
nccl_abi::Result NcclInitV3(void** context, int* activation_mask);
nccl_abi::Result NcclStartEventV5(void* context, void** handle, nccl_abi::EventDescrV5* descr);
nccl_abi::Result NcclStartEventV4(void* context, void** handle, nccl_abi::EventDescrV4* descr);
nccl_abi::Result NcclStartEventV3(void* context, void** handle, nccl_abi::EventDescrV3* descr);
nccl_abi::Result NcclStopEvent(void* handle);
nccl_abi::Result NcclRecordEventStateV5(void* handle, int state, nccl_abi::StateArgsV5* args);  // and v4
nccl_abi::Result NcclRecordEventStateV3(void* handle, int state, nccl_abi::StateArgsV3* args);
nccl_abi::Result NcclFinalize(void* context);

inline constexpr const char* kNcclPluginName = "rankscope";

}  // namespace rankscope::collector
