// NVTX v3 injection: fills the function tables NVTX hands to InitializeInjectionNvtx2
// (once per module that uses NVTX) and InitializeInjectionNvtxExtension (payloads) with
// handlers that record through the process's Recorder.
#pragma once

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

namespace rankscope::collector {

class Recorder;

// The recorder the handlers use; set once at start-up, never changed while NVTX may call.
void SetNvtxRecorder(Recorder* recorder);

// Returns NVTX's expected result: 1 when the handlers are installed, 0 to turn NVTX off
// for the calling module.
int InstallNvtxHandlers(NvtxGetExportTableFunc_t get_export_table);
int InstallNvtxPayloadExtension(nvtxExtModuleInfo_t* module_info);

}  // namespace rankscope::collector
