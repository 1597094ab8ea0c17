// Run under the collector (LD_PRELOAD, NVTX_INJECTION64_PATH): records an NVTX range, then
// calls the preloaded library's InitializeInjection as the CUDA driver does during cuInit
// when CUDA_INJECTION64_PATH names it, then records more ranges. Without a GPU CUPTI cannot
// start there; the ranges must be recorded either way.
//
// Exit status: 0 done; 2 InitializeInjection is not in the process (the collector is not
// preloaded); 3 InitializeInjection refused, which the driver would report as a failed
// injection.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>

int main() {
  nvtxRangePushA("before-cuda");
  nvtxRangePop();

  using InitializeInjection = int (*)();
  auto initialize = reinterpret_cast<InitializeInjection>(dlsym(RTLD_DEFAULT, "InitializeInjection"));
  if (initialize == nullptr) {
    std::fprintf(stderr, "cuda_injection_program: InitializeInjection not found: is the collector preloaded?\n");
    return 2;
  }
  if (initialize() != 1) {
    std::fprintf(stderr, "cuda_injection_program: InitializeInjection did not return 1\n");
    return 3;
  }

  nvtxRangePushA("after-cuda");
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("step");
    nvtxRangePop();
  }
  nvtxRangePop();
  return 0;
}
