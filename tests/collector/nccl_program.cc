// Calls NCCL's collectives with a null communicator. Without a GPU they fail argument
// checks, but NCCL 2.28 emits its NVTX range and payload first, which is what the
// collector test needs.
#include <nccl.h>

#include <cstdio>

int main() {
  ncclUniqueId id;
  (void)ncclGetUniqueId(&id);  // registers NCCL's reduction-op enum (may fail without GPU)
  float buffer[1024] = {};
  (void)ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, nullptr, nullptr);
  (void)ncclBroadcast(buffer, buffer, 256, ncclBfloat16, 3, nullptr, nullptr);
  (void)ncclSend(buffer, 10, ncclInt64, 5, nullptr, nullptr);
  (void)ncclAllGather(buffer, buffer, 64, ncclInt32, nullptr, nullptr);
  std::printf("done\n");
  return 0;
}
