// The exported face of librankscope_collector.so: the NVTX injection entry points, the
// constructor that starts recording when the library is preloaded, the flush points
// (exit, SIGTERM/SIGINT, exec) and the fork rule. Everything else is hidden.
//
// Lifecycle rules (also in collector/README.md):
// - Without RANKSCOPE_RUN_DIR the library does nothing, and NVTX turns itself off.
// - exit: the library destructor drains, writes end-of-run meta and closes the file.
// - SIGTERM/SIGINT: our handler flushes; if the program had its own handler we call it
//   afterwards, otherwise we close the file and re-raise with the default action, so the
//   exit status is the one the program would have had. An ignored signal stays ignored.
// - exec: the file is closed before the new image replaces the process.
// - fork: the child records nothing (it would otherwise share the parent's rank). A child
//   that execs starts afresh in its new image.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collector/nvtx_handlers.h"
#include "collector/proc_files.h"
#include "collector/rank_env.h"
#include "collector/recorder.h"

#define RANKSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace rankscope::collector {
namespace {

Recorder* g_recorder = nullptr;  // leaked on purpose: it must outlive every static
bool g_started = false;
constexpr int kHandledSignals[] = {SIGTERM, SIGINT};
struct sigaction g_previous[2];
constexpr auto kSignalFlushTimeout = std::chrono::seconds(5);

std::string CommandLine() {
  std::string raw = ReadSmallFile("/proc/self/cmdline", 8192);
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  for (char& c : raw) {
    if (c == '\0') c = ' ';
  }
  return raw;
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

void OnSignal(int signal_number, siginfo_t* info, void* context) {
  int index = signal_number == SIGTERM ? 0 : 1;
  const struct sigaction& previous = g_previous[index];
  bool program_handles = (previous.sa_flags & SA_SIGINFO) != 0
                             ? previous.sa_sigaction != nullptr
                             : previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN;
  if (g_recorder != nullptr && g_recorder->recording()) {
    g_recorder->FlushFromSignal(/*close=*/!program_handles, signal_number, kSignalFlushTimeout);
  }
  if (program_handles) {
    if ((previous.sa_flags & SA_SIGINFO) != 0) {
      previous.sa_sigaction(signal_number, info, context);
    } else {
      previous.sa_handler(signal_number);
    }
    return;
  }
  // Default action: restore it and deliver the signal again once this handler returns
  // (it is blocked while we run).
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  raise(signal_number);
}

void InstallSignalHandlers() {
  for (int i = 0; i < 2; ++i) {
    struct sigaction current {};
    if (sigaction(kHandledSignals[i], nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_IGN) continue;
    g_previous[i] = current;
    struct sigaction ours {};
    ours.sa_sigaction = &OnSignal;
    ours.sa_flags = SA_SIGINFO | SA_RESTART | (current.sa_flags & SA_ONSTACK);
    ours.sa_mask = current.sa_mask;
    sigaction(kHandledSignals[i], &ours, nullptr);
  }
}

void InForkedChild() {
  if (g_recorder != nullptr) g_recorder->AbandonAfterFork();
}

void CloseBeforeExec() {
  if (g_recorder != nullptr && g_recorder->recording()) {
    (void)g_recorder->Close(Recorder::EndReason::kExec);
  }
}

}  // namespace

// Runs once, from the constructor of a preloaded library or from the first NVTX init.
void StartCollector() {
  if (g_started) return;
  g_started = true;
  auto config = ReadConfig([](const char* name) { return std::getenv(name); });
  if (!config.ok()) {
    std::fprintf(stderr, "rankscope: recording off: %s\n", config.status().message().c_str());
    return;
  }
  if (config->run_dir.empty()) return;  // not under `rankscope profile`
  RecorderOptions options;
  options.config = std::move(*config);
  options.host = HostName();
  options.pid = getpid();
  options.command_line = CommandLine();
  g_recorder = new Recorder(std::move(options));
  SetNvtxRecorder(g_recorder);
  InstallSignalHandlers();
  pthread_atfork(nullptr, nullptr, &InForkedChild);
}

}  // namespace rankscope::collector

using rankscope::collector::CloseBeforeExec;

__attribute__((constructor)) static void RankscopeCollectorStart() {
  rankscope::collector::StartCollector();
}

__attribute__((destructor)) static void RankscopeCollectorStop() {
  auto* recorder = rankscope::collector::g_recorder;
  if (recorder != nullptr && recorder->recording()) {
    (void)recorder->Close(rankscope::collector::Recorder::EndReason::kExit);
  }
}

RANKSCOPE_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  rankscope::collector::StartCollector();
  return rankscope::collector::InstallNvtxHandlers(get_export_table);
}

RANKSCOPE_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* module_info) {
  rankscope::collector::StartCollector();
  return rankscope::collector::InstallNvtxPayloadExtension(module_info);
}

// ---- exec wrappers: close the trace, then call the real function ----

namespace {

template <typename Function>
Function Real(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

// Collects the variadic arguments of execl* into an argv array.
std::vector<char*> ArgvFromList(const char* first, va_list& list) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(first));
  while (argv.back() != nullptr) argv.push_back(va_arg(list, char*));
  return argv;
}

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);

}  // namespace

RANKSCOPE_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  CloseBeforeExec();
  return Real<ExecveFn>("execve")(path, argv, envp);
}

RANKSCOPE_EXPORT int execv(const char* path, char* const argv[]) {
  CloseBeforeExec();
  return Real<ExecvFn>("execv")(path, argv);
}

RANKSCOPE_EXPORT int execvp(const char* file, char* const argv[]) {
  CloseBeforeExec();
  return Real<ExecvFn>("execvp")(file, argv);
}

RANKSCOPE_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  CloseBeforeExec();
  return Real<ExecveFn>("execvpe")(file, argv, envp);
}

RANKSCOPE_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  CloseBeforeExec();
  return Real<FexecveFn>("fexecve")(fd, argv, envp);
}

RANKSCOPE_EXPORT int execl(const char* path, const char* arg, ...) {
  va_list list;
  va_start(list, arg);
  std::vector<char*> argv = ArgvFromList(arg, list);
  va_end(list);
  return execv(path, argv.data());
}

RANKSCOPE_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list list;
  va_start(list, arg);
  std::vector<char*> argv = ArgvFromList(arg, list);
  va_end(list);
  return execvp(file, argv.data());
}

RANKSCOPE_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list list;
  va_start(list, arg);
  std::vector<char*> argv = ArgvFromList(arg, list);
  char* const* envp = va_arg(list, char* const*);
  va_end(list);
  return execve(path, argv.data(), envp);
}
