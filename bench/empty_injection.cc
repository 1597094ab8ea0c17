// An NVTX injection whose handlers do nothing: the baseline cost of NVTX's dispatch into
// any tool, against which the collector's own cost is measured.
#include <nvtx3/nvToolsExt.h>

namespace {
int EmptyPush(const char*) { return 0; }
int EmptyPop() { return 0; }
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0) return 0;
  if (NVTX_CBID_CORE_RangePushA < size) *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&EmptyPush);
  if (NVTX_CBID_CORE_RangePop < size) *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&EmptyPop);
  return 1;
}
