#include "collector/cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace rankscope::collector {
namespace {

template <typename Function>
bool Resolve(void* library, const char* symbol, Function* out, std::string* missing) {
  *out = reinterpret_cast<Function>(dlsym(library, symbol));
  if (*out == nullptr && missing->empty()) *missing = symbol;
  return *out != nullptr;
}

Result<CuptiApi*> Load() {
  std::vector<std::string> candidates;
  if (const char* explicit_path = std::getenv("RANKSCOPE_CUPTI_LIBRARY"); explicit_path != nullptr && *explicit_path) {
    candidates.push_back(explicit_path);
  } else {
    candidates.push_back(fmt::format("libcupti.so.{}", kCuptiBuiltVersion / 10000));
#ifdef RANKSCOPE_CUPTI_LIBRARY_PATH
    candidates.push_back(RANKSCOPE_CUPTI_LIBRARY_PATH);
#endif
  }
  void* library = nullptr;
  std::string last_error;
  for (const std::string& candidate : candidates) {
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* error = dlerror();
    last_error = error != nullptr ? error : candidate;
  }
  if (library == nullptr) return NotFound(fmt::format("cannot load libcupti: {}", last_error));

  auto* api = new CuptiApi();  // lives for the process, like the library
  std::string missing;
  Resolve(library, "cuptiGetVersion", &api->GetVersion, &missing);
  Resolve(library, "cuptiGetResultString", &api->GetResultString, &missing);
  Resolve(library, "cuptiSubscribe_v2", &api->Subscribe_v2, &missing);
  Resolve(library, "cuptiUnsubscribe", &api->Unsubscribe, &missing);
  Resolve(library, "cuptiEnableCallback", &api->EnableCallback, &missing);
  Resolve(library, "cuptiEnableDomain", &api->EnableDomain, &missing);
  Resolve(library, "cuptiSetThreadIdType", &api->SetThreadIdType, &missing);
  Resolve(library, "cuptiActivityRegisterTimestampCallback", &api->ActivityRegisterTimestampCallback, &missing);
  Resolve(library, "cuptiActivityRegisterCallbacks", &api->ActivityRegisterCallbacks, &missing);
  Resolve(library, "cuptiActivityEnable", &api->ActivityEnable, &missing);
  Resolve(library, "cuptiActivityDisable", &api->ActivityDisable, &missing);
  Resolve(library, "cuptiActivityEnableDriverApi", &api->ActivityEnableDriverApi, &missing);
  Resolve(library, "cuptiActivityEnableRuntimeApi", &api->ActivityEnableRuntimeApi, &missing);
  Resolve(library, "cuptiActivityFlushAll", &api->ActivityFlushAll, &missing);
  Resolve(library, "cuptiActivityFlushPeriod", &api->ActivityFlushPeriod, &missing);
  Resolve(library, "cuptiActivityGetNextRecord", &api->ActivityGetNextRecord, &missing);
  Resolve(library, "cuptiActivityGetNumDroppedRecords", &api->ActivityGetNumDroppedRecords, &missing);
  Resolve(library, "cuptiActivityPushExternalCorrelationId", &api->ActivityPushExternalCorrelationId, &missing);
  Resolve(library, "cuptiActivityPopExternalCorrelationId", &api->ActivityPopExternalCorrelationId, &missing);
  Resolve(library, "cuptiGetCallbackName", &api->GetCallbackName, &missing);
  Resolve(library, "cuptiGetContextId", &api->GetContextId, &missing);
  Resolve(library, "cuptiGetDeviceId", &api->GetDeviceId, &missing);
  Resolve(library, "cuptiGetStreamIdEx", &api->GetStreamIdEx, &missing);
  if (!missing.empty()) {
    delete api;
    return Unsupported(fmt::format("libcupti lacks {}: not the CUPTI this collector was built for", missing));
  }
  uint32_t version = 0;
  if (api->GetVersion(&version) != CUPTI_SUCCESS || !CuptiVersionCompatible(version)) {
    delete api;
    return Unsupported(fmt::format("libcupti version {} does not match the CUPTI {} headers this collector was built with",
                                   version, kCuptiBuiltVersion / 10000));
  }
  return api;
}

}  // namespace

std::string CuptiResultText(const CuptiApi& api, CUptiResult result) {
  const char* text = nullptr;
  if (api.GetResultString != nullptr && api.GetResultString(result, &text) == CUPTI_SUCCESS && text != nullptr) {
    return fmt::format("{} ({})", text, static_cast<int>(result));
  }
  return fmt::format("CUPTI error {}", static_cast<int>(result));
}

bool CuptiVersionCompatible(uint32_t library_version) {
  // Record layouts are fixed within a major version (the records' struct names carry their
  // own versions); another major may deliver other structs for the same kinds.
  return library_version / 10000 == kCuptiBuiltVersion / 10000;
}

Result<CuptiApi*> LoadCupti() {
  static std::once_flag once;
  static Result<CuptiApi*>* loaded = nullptr;  // never destroyed: used until process exit
  std::call_once(once, [] { loaded = new Result<CuptiApi*>(Load()); });
  return *loaded;
}

}  // namespace rankscope::collector
