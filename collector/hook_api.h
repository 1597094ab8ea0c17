// The collector's face for language hooks: what the exported `rankscope_hook_*` functions
// (collector/injection.cc) do with a recorder. The PyTorch hook that `rankscope profile
// --pytorch` injects (cli/pytorch_hook/) calls them through ctypes. Every function checks its
// arguments, returns 1 when it recorded and 0 when it did not (no recorder, recording off,
// arguments it refuses), and never throws.
//
// The C ABI (version kHookAbiVersion), for hooks in any language:
//   int rankscope_hook_version(void);
//   int rankscope_hook_active(void);
//   int rankscope_hook_range(const char* name, int64_t start_ns, int64_t end_ns, int role,
//                            const char* args_json);
//   int rankscope_hook_collective(const char* name, const char* comm_name, int64_t start_ns,
//                                 int64_t end_ns, uint64_t comm_hash, uint64_t sequence,
//                                 int op, int reduce_op, int datatype, uint64_t bytes,
//                                 int root, int peer, int comm_rank, int comm_size,
//                                 const char* args_json);
//   int rankscope_hook_collective_begin(const char* name, const char* comm_name, int64_t start_ns,
//                                       uint64_t comm_hash, uint64_t sequence, int op, uint64_t bytes,
//                                       int root, int peer, int comm_rank, int comm_size);
//   int rankscope_hook_meta(const char* key, const char* value);
// rankscope_hook_collective_begin (added within version 1; look it up before calling) says
// the rank entered a collective: it is in flight in the rank file's in-flight state until
// rankscope_hook_collective reports it finished with the same comm_hash and sequence.
// Times are CLOCK_REALTIME nanoseconds. role: 0 annotation, 1 compute, 2 comm. op, reduce_op
// and datatype are trace::CollectiveOp, ReduceOp and DataType numbers. args_json may be NULL
// or "" and must otherwise be a JSON object. Meta keys must start with "pytorch." or be
// "backend".
#pragma once

#include <cstdint>

namespace rankscope::collector {

class Recorder;

int HookRange(Recorder* recorder, const char* name, int64_t start_ns, int64_t end_ns, int role,
              const char* args_json);
int HookCollective(Recorder* recorder, const char* name, const char* comm_name, int64_t start_ns,
                   int64_t end_ns, uint64_t comm_hash, uint64_t sequence, int op, int reduce_op,
                   int datatype, uint64_t bytes, int root, int peer, int comm_rank, int comm_size,
                   const char* args_json);
int HookCollectiveBegin(Recorder* recorder, const char* name, const char* comm_name, int64_t start_ns,
                        uint64_t comm_hash, uint64_t sequence, int op, uint64_t bytes, int root, int peer,
                        int comm_rank, int comm_size);
int HookMeta(Recorder* recorder, const char* key, const char* value);

}  // namespace rankscope::collector
