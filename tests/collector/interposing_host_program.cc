// A host process with an SQLite and an fmt of its own, for the test that the injected
// collector keeps to its own copies. The build exports this program's symbols (as a program
// linked against another SQLite or fmt would export them through its libraries), and these
// definitions come first in the process's symbol lookup: a collector that left any of these
// names for the loader to bind would call them. Each one says so on stderr and fails, so the
// rank file would stay empty too. Then it records nested NVTX ranges on two threads.
#include <fmt/core.h>
#include <nvtx3/nvToolsExt.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr int kIterations = 50;

void SayCalled(const char* function) {
  // write(2) alone: no stdio state of the host that a collector thread could disturb.
  const std::string line = std::string("interposing_host_program: the host's ") + function + " was called\n";
  [[maybe_unused]] ssize_t written = write(STDERR_FILENO, line.data(), line.size());
}

void RecordRanges(const char* outer, const char* inner) {
  for (int i = 0; i < kIterations; ++i) {
    nvtxRangePushA(outer);
    nvtxRangePushA(inner);
    nvtxRangePop();
    nvtxRangePop();
  }
}

}  // namespace

extern "C" {

const char* sqlite3_libversion(void) {
  SayCalled("sqlite3_libversion");
  return "0.0.0-host";
}

int sqlite3_open_v2(const char*, sqlite3** db, int, const char*) {
  SayCalled("sqlite3_open_v2");
  if (db != nullptr) *db = nullptr;
  return SQLITE_CANTOPEN;
}

int sqlite3_prepare_v2(sqlite3*, const char*, int, sqlite3_stmt** statement, const char**) {
  SayCalled("sqlite3_prepare_v2");
  if (statement != nullptr) *statement = nullptr;
  return SQLITE_ERROR;
}

int sqlite3_prepare_v3(sqlite3*, const char*, int, unsigned int, sqlite3_stmt** statement, const char**) {
  SayCalled("sqlite3_prepare_v3");
  if (statement != nullptr) *statement = nullptr;
  return SQLITE_ERROR;
}

int sqlite3_step(sqlite3_stmt*) {
  SayCalled("sqlite3_step");
  return SQLITE_MISUSE;
}

int sqlite3_exec(sqlite3*, const char*, int (*)(void*, int, char**, char**), void*, char** error) {
  SayCalled("sqlite3_exec");
  if (error != nullptr) *error = nullptr;
  return SQLITE_ERROR;
}

int sqlite3_close(sqlite3*) {
  SayCalled("sqlite3_close");
  return SQLITE_MISUSE;
}

int sqlite3_close_v2(sqlite3*) {
  SayCalled("sqlite3_close_v2");
  return SQLITE_MISUSE;
}

}  // extern "C"

// The out-of-line function behind fmt::format (the collector's text, meta entries and
// warnings go through it).
namespace fmt {
inline namespace v9 {
std::string vformat(string_view, format_args) {
  SayCalled("fmt::vformat");
  return "garbage from the host's fmt";
}
}  // namespace v9
}  // namespace fmt

int main() {
  // NVTX loads the collector at its first call: on one thread, before the second starts
  // (NVTX's own lazy start is not thread-safe).
  nvtxInitialize(nullptr);
  std::thread worker(RecordRanges, "worker-outer", "worker-inner");
  RecordRanges("main-outer", "main-inner");
  worker.join();
  return 0;
}
