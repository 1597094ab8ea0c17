// libFuzzer target for the importers: the input is written to a file and imported as a
// Kineto JSON trace (RANKSCOPE_FUZZ_FORMAT_KINETO) or an Nsight Systems SQLite export
// (RANKSCOPE_FUZZ_FORMAT_NSYS). Whatever the bytes, the import must end in a value (a run or
// a one-line error), never a crash, a hang, a leak or undefined behaviour.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "interop/interop.h"

namespace {

namespace fs = std::filesystem;

const fs::path& WorkDirectory() {
  static const fs::path* dir = [] {
    auto* path = new fs::path(fs::temp_directory_path() / ("rankscope-fuzz-" + std::to_string(getpid())));
    fs::create_directories(*path);
    return path;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& work = WorkDirectory();
#if defined(RANKSCOPE_FUZZ_FORMAT_NSYS)
  const fs::path input = work / "input.sqlite";
#else
  const fs::path input = work / "input.json";
#endif
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const fs::path run = work / "run";
  std::error_code ec;
  fs::remove_all(run, ec);
  (void)rankscope::interop::ImportTraces({input}, run);
  return 0;
}
