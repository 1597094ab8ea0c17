// The NCCL profiler-plugin interface, versions 3 (NCCL 2.26), 4 (2.27) and 5 (2.28), written
// from NCCL's documented plugin interface (ext-profiler/README.md and the versioned
// descriptor definitions it publishes). NCCL loads the plugin library and looks up the
// symbol `ncclProfiler_v5`, then v4, v3, ...; each is a struct of function pointers.
// NCCL installs no header for it (its source tree has src/include/plugin/profiler/
// profiler_vN.h): plugins carry their own copy of the definitions.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace rankscope::collector::nccl_abi {

// ncclResult_t: a C enum, passed as an int. Only init may fail (NCCL then disables the
// plugin for that communicator); every other call must return success.
using Result = int;
inline constexpr Result kSuccess = 0;
inline constexpr Result kInternalError = 3;

// ncclDebugLogger_t.
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* format, ...);

// Event types, as the bit each sets in the activation mask.
enum EventType : uint64_t {
  kGroup = 1 << 0,
  kColl = 1 << 1,
  kP2p = 1 << 2,
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,      // v5
  kCollApi = 1 << 9,       // v5
  kP2pApi = 1 << 10,       // v5
  kKernelLaunch = 1 << 11, // v5
};

// ncclProfilerEventState_t: one enum for every version.
enum EventState : int {
  kProxyOpSendPosted = 0,
  kProxyOpSendRemFifoWait = 1,
  kProxyOpSendTransmitted = 2,
  kProxyOpSendDone = 3,
  kProxyOpRecvPosted = 4,
  kProxyOpRecvReceived = 5,
  kProxyOpRecvTransmitted = 6,
  kProxyOpRecvDone = 7,
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGpuWait = 12,
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  kProxyOpInProgressV4 = 19,
  kProxyStepSendPeerWaitV4 = 20,
  kNetPluginUpdate = 21,
  kKernelChStop = 22,
  kGroupStartApiStop = 23,
  kGroupEndApiStart = 24,
};

// ---- descriptor parts every version lays out alike ---------------------------------------

struct ProxyOpDescr {
  pid_t pid;  // the process that created the operation (PXN: maybe another one)
  uint8_t channel;
  int peer;
  int steps;
  int chunk_size;
  int is_send;
};

struct ProxyStepDescr {
  int step;
};

// Versions 4 and 5; version 3 has the channel only.
struct KernelChDescr {
  uint8_t channel;
  uint64_t gpu_timer;  // %globaltimer when the channel started
};

struct NetPluginDescr {
  int64_t id;
  void* data;
};

// ---- version 5 (NCCL 2.28) ---------------------------------------------------------------

struct EventDescrV5 {
  uint64_t type;
  void* parent;  // the parent event's handle
  int rank;
  union {
    struct {
      bool graph_captured;  // NCCL's profiler_v5.h: bool, then int at offset 4
      int group_depth;
    } group_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graph_captured;
    } coll_api;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graph_captured;
    } p2p_api;
    struct {
      void* stream;
    } kernel_launch;
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t channels;
      uint8_t warps;
      const char* algo;
      const char* proto;
      void* parent_group;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t channels;
      void* parent_group;
    } p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    NetPluginDescr net_plugin;
  };
};

// Also the state arguments of version 4.
union StateArgsV5 {
  struct {
    size_t trans_size;
  } proxy_step;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
  struct {
    void* data;
  } net_plugin;
  struct {
    uint64_t gpu_timer;  // %globaltimer when the channel stopped (kKernelChStop)
  } kernel_ch;
};

struct ProfilerV5 {
  const char* name;
  Result (*init)(void** context, uint64_t comm_id, int* activation_mask, const char* comm_name, int nodes, int ranks,
                 int rank, Logger log);
  Result (*start_event)(void* context, void** handle, EventDescrV5* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, StateArgsV5* args);
  Result (*finalize)(void* context);
};

// ---- version 4 (NCCL 2.27) ---------------------------------------------------------------

struct EventDescrV4 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t channels;
      uint8_t warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t channels;
    } p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    KernelChDescr kernel_ch;
    NetPluginDescr net_plugin;
  };
};

struct ProfilerV4 {
  const char* name;
  Result (*init)(void** context, int* activation_mask, const char* comm_name, uint64_t comm_hash, int nodes, int ranks,
                 int rank, Logger log);
  Result (*start_event)(void* context, void** handle, EventDescrV4* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, StateArgsV5* args);
  Result (*finalize)(void* context);
};

// ---- version 3 (NCCL 2.26) ---------------------------------------------------------------

struct EventDescrV3 {
  uint8_t type;
  void* parent;
  int rank;
  union {
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      uint64_t seq_number;
      const char* func;
      const void* send_buff;
      void* recv_buff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t max_channels;
      uint8_t warps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* comm_name;
      uint64_t comm_hash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    ProxyOpDescr proxy_op;
    ProxyStepDescr proxy_step;
    struct {
      uint8_t channel;
    } kernel_ch;
    NetPluginDescr net_plugin;
  };
};

union StateArgsV3 {
  struct {
    size_t trans_size;
    int steps;
  } proxy_op;
  struct {
    int appended_proxy_ops;
  } proxy_ctrl;
};

struct ProfilerV3 {
  const char* name;
  Result (*init)(void** context, int* activation_mask);
  Result (*start_event)(void* context, void** handle, EventDescrV3* descr);
  Result (*stop_event)(void* handle);
  Result (*record_event_state)(void* handle, int state, StateArgsV3* args);
  Result (*finalize)(void* context);
};

// The layouts NCCL's C definitions have on LP64 (x86-64, aarch64).
static_assert(sizeof(EventDescrV5) == 112 && offsetof(EventDescrV5, coll.seq_number) == 24 &&
              offsetof(EventDescrV5, coll.channels) == 80 && offsetof(EventDescrV5, coll.parent_group) == 104 &&
              offsetof(EventDescrV5, kernel_ch.gpu_timer) == 32 && offsetof(EventDescrV5, proxy_op.peer) == 32 &&
              offsetof(EventDescrV5, group_api.group_depth) == 28);
static_assert(sizeof(EventDescrV4) == 104 && offsetof(EventDescrV4, coll.proto) == 96 &&
              offsetof(EventDescrV4, p2p.channels) == 60);
static_assert(sizeof(EventDescrV3) == 120 && offsetof(EventDescrV3, coll.seq_number) == 40 &&
              offsetof(EventDescrV3, p2p.peer) == 72);
static_assert(sizeof(StateArgsV5) == 8 && sizeof(StateArgsV3) == 16);

}  // namespace rankscope::collector::nccl_abi
