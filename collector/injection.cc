// The exported face of librankscope_collector.so: the NVTX injection entry points, the
// constructor that starts recording when the library is preloaded, the flush points
// (exit, SIGTERM/SIGINT/SIGHUP/SIGQUIT, exec) and the fork rule. Everything else is hidden.
//
// CUDA: the driver calls InitializeInjection during cuInit when CUDA_INJECTION64_PATH names
// this library; CUPTI starts there. A library loaded after CUDA started (dlopen'ed as NCCL's
// profiler plugin, say) starts CUPTI from a helper thread once it sees CUDA initialized.
//
// Lifecycle rules (also in collector/README.md):
// - Without RANKSCOPE_RUN_DIR the library does nothing, and NVTX turns itself off.
// - exit: the library destructor drains, writes end-of-run meta and closes the file.
// - SIGTERM/SIGINT/SIGHUP/SIGQUIT (the signals that end a process by default and that
//   people and launchers send to stop one): our handler flushes; if the program had its own
//   handler we call it afterwards, otherwise we close the file and re-raise with the default
//   action, so the exit status (and SIGQUIT's core dump) is the one the program would have
//   had. An ignored signal stays ignored.
// - exec: the file is closed before the new image replaces the process.
// - fork: the child records nothing (it would otherwise share the parent's rank). A child
//   that execs starts afresh in its new image.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collector/hook_api.h"
#include "collector/hook_events.h"
#include "collector/nccl_plugin.h"
#include "collector/no_throw.h"
#include "collector/nvtx_handlers.h"
#include "collector/proc_files.h"
#include "collector/rank_env.h"
#include "collector/recorder.h"
#include "collector/stderr_line.h"
#ifdef RANKSCOPE_HAVE_CUPTI
#include "collector/cupti_tracer.h"
#endif

#define RANKSCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace rankscope::collector {
namespace {

Recorder* g_recorder = nullptr;  // leaked on purpose: it must outlive every static
bool g_started = false;
constexpr int kHandledSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
constexpr size_t kHandledSignalCount = std::size(kHandledSignals);
struct sigaction g_previous[kHandledSignalCount];
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
  size_t index = 0;
  while (index + 1 < kHandledSignalCount && kHandledSignals[index] != signal_number) ++index;
  const struct sigaction& previous = g_previous[index];
  bool program_handles = (previous.sa_flags & SA_SIGINFO) != 0
                             ? previous.sa_sigaction != nullptr
                             : previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN;
  if (g_recorder != nullptr && g_recorder->recording()) {
    g_recorder->FlushFromSignal(/*close=*/!program_handles, signal_number, kSignalFlushTimeout);
  }
  // A close already under way (an earlier signal's, or the exit path's) finishes before this
  // signal's default action can end the process in the middle of it.
  if (g_recorder != nullptr && !program_handles) g_recorder->WaitForCloseFromSignal(kSignalFlushTimeout);
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
  for (size_t i = 0; i < kHandledSignalCount; ++i) {
    struct sigaction current {};
    if (sigaction(kHandledSignals[i], nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_IGN) continue;
    g_previous[i] = current;
    struct sigaction ours {};
    ours.sa_sigaction = &NoThrow<&OnSignal>::Call;
    ours.sa_flags = SA_SIGINFO | SA_RESTART | (current.sa_flags & SA_ONSTACK);
    ours.sa_mask = current.sa_mask;
    sigaction(kHandledSignals[i], &ours, nullptr);
  }
}

void InForkedChild() {
  if (g_recorder != nullptr) g_recorder->AbandonAfterFork();
}

// CUPTI's last flush must happen while CUDA still works: from an atexit handler registered
// after the CUDA runtime's own (which CUDA registered before it initialized the driver).
void FinishDeviceTracingAtExit() {
  if (g_recorder != nullptr) g_recorder->FinishDeviceTracing(std::chrono::seconds(10));
}

void StartDeviceTracing() {
  static std::mutex mutex;  // InitializeInjection and the late-start thread may race
  std::lock_guard lock(mutex);
  if (g_recorder == nullptr || !g_recorder->recording() || g_recorder->has_device_tracer()) return;
#ifdef RANKSCOPE_HAVE_CUPTI
  if (StartCuptiTracing(*g_recorder)) std::atexit(&NoThrow<&FinishDeviceTracingAtExit>::Call);
#else
  g_recorder->SetMeta("cupti.status", "off: this collector was built without CUPTI");
  WriteStderrLine("rankscope: " + g_recorder->describe_process() +
                  ": CUDA activity is not recorded: this collector was built without CUPTI");
#endif
}

// True when libcuda is loaded and cuInit has run. cuCtxGetCurrent answers
// CUDA_ERROR_NOT_INITIALIZED (3) or DEINITIALIZED (4) without initializing anything.
bool CudaInitialized() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (libcuda == nullptr) return false;
  using CtxGetCurrent = int (*)(void**);
  auto get_current = reinterpret_cast<CtxGetCurrent>(dlsym(libcuda, "cuCtxGetCurrent"));
  void* context = nullptr;
  const int result = get_current != nullptr ? get_current(&context) : 3;
  dlclose(libcuda);
  return result != 3 && result != 4;
}

void StartDeviceTracingIfCudaInitialized() {
  if (CudaInitialized()) StartDeviceTracing();
}

// Loaded into a process where libcuda already is: CUPTI attaches now rather than at a
// cuInit that already happened. The check runs on its own thread because this may be
// cuInit itself loading us (CUDA_INJECTION64_PATH), with the driver's lock held.
void StartDeviceTracingIfCudaRuns() {
  void* libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (libcuda == nullptr) return;
  dlclose(libcuda);
  std::thread([] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    NoThrow<&StartDeviceTracingIfCudaInitialized>::Call();
  }).detach();
}

void CloseBeforeExecUnguarded() {
  if (g_recorder != nullptr && g_recorder->recording()) {
    (void)g_recorder->Close(Recorder::EndReason::kExec);
  }
}

// The exec wrappers go on to exec whatever happened here.
void CloseBeforeExec() { NoThrow<&CloseBeforeExecUnguarded>::Call(); }

}  // namespace

// Runs once, from the constructor of a preloaded library or from the first NVTX init.
void StartCollector() {
  if (g_started) return;
  g_started = true;
  auto config = ReadConfig([](const char* name) { return std::getenv(name); });
  if (!config.ok()) {
    WriteStderrLine("rankscope: recording off: " + config.status().message());
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
  SetNcclRecorder(g_recorder);
  InstallSignalHandlers();
  pthread_atfork(nullptr, nullptr, &NoThrow<&InForkedChild>::Call);
  StartDeviceTracingIfCudaRuns();
}

}  // namespace rankscope::collector

using rankscope::collector::CloseBeforeExec;

// NCCL's profiler plugin (NCCL_PROFILER_PLUGIN names this library): NCCL takes the newest
// version it knows. Constant-initialized, so they are valid before any constructor runs.
namespace nccl_abi = rankscope::collector::nccl_abi;
using namespace rankscope::collector;  // the plugin callbacks
// Every callback behind the exception barrier; a failed init leaves that communicator out.
template <auto Function>
constexpr auto kGuarded = &NoThrow<Function, nccl_abi::kSuccess>::Call;
template <auto Function>
constexpr auto kGuardedInit = &NoThrow<Function, nccl_abi::kInternalError>::Call;
RANKSCOPE_EXPORT const nccl_abi::ProfilerV5 ncclProfiler_v5 = {
    kNcclPluginName,           kGuardedInit<&NcclInitV5>,           kGuarded<&NcclStartEventV5>,
    kGuarded<&NcclStopEvent>, kGuarded<&NcclRecordEventStateV5>, kGuarded<&NcclFinalize>};
RANKSCOPE_EXPORT const nccl_abi::ProfilerV4 ncclProfiler_v4 = {
    kNcclPluginName,           kGuardedInit<&NcclInitV4>,           kGuarded<&NcclStartEventV4>,
    kGuarded<&NcclStopEvent>, kGuarded<&NcclRecordEventStateV5>, kGuarded<&NcclFinalize>};
RANKSCOPE_EXPORT const nccl_abi::ProfilerV3 ncclProfiler_v3 = {
    kNcclPluginName,           kGuardedInit<&NcclInitV3>,           kGuarded<&NcclStartEventV3>,
    kGuarded<&NcclStopEvent>, kGuarded<&NcclRecordEventStateV3>, kGuarded<&NcclFinalize>};

// CUDA's injection entry point (CUDA_INJECTION64_PATH), called once during cuInit.
namespace rankscope::collector {
namespace {

int StartCudaInjection() {
  StartCollector();
  StartDeviceTracing();
  return 1;
}

void StopAtUnload() {
  if (g_recorder != nullptr && g_recorder->recording()) (void)g_recorder->Close(Recorder::EndReason::kExit);
}

int StartNvtxInjection(NvtxGetExportTableFunc_t get_export_table) {
  StartCollector();
  return InstallNvtxHandlers(get_export_table);
}

int StartNvtxExtension(nvtxExtModuleInfo_t* module_info) {
  StartCollector();
  return InstallNvtxPayloadExtension(module_info);
}

}  // namespace
}  // namespace rankscope::collector

// CUDA goes on whatever happens here: 1 even when the collector failed.
RANKSCOPE_EXPORT int InitializeInjection() { return NoThrow<&StartCudaInjection, 1>::Call(); }

__attribute__((constructor)) static void RankscopeCollectorStart() { NoThrow<&StartCollector>::Call(); }

__attribute__((destructor)) static void RankscopeCollectorStop() { NoThrow<&StopAtUnload>::Call(); }

// ---- language hooks (collector/hook_api.h) ----

namespace rankscope::collector {
namespace {
int HookVersion() { return kHookAbiVersion; }
int HookActive() { return g_recorder != nullptr && g_recorder->recording() ? 1 : 0; }
int HookRangeExported(const char* name, int64_t start_ns, int64_t end_ns, int role, const char* args_json) {
  return HookRange(g_recorder, name, start_ns, end_ns, role, args_json);
}
int HookCollectiveExported(const char* name, const char* comm_name, int64_t start_ns, int64_t end_ns,
                           uint64_t comm_hash, uint64_t sequence, int op, int reduce_op, int datatype,
                           uint64_t bytes, int root, int peer, int comm_rank, int comm_size, const char* args_json) {
  return HookCollective(g_recorder, name, comm_name, start_ns, end_ns, comm_hash, sequence, op, reduce_op, datatype,
                        bytes, root, peer, comm_rank, comm_size, args_json);
}
int HookCollectiveBeginExported(const char* name, const char* comm_name, int64_t start_ns, uint64_t comm_hash,
                                uint64_t sequence, int op, uint64_t bytes, int root, int peer, int comm_rank,
                                int comm_size) {
  return HookCollectiveBegin(g_recorder, name, comm_name, start_ns, comm_hash, sequence, op, bytes, root, peer,
                             comm_rank, comm_size);
}
int HookMetaExported(const char* key, const char* value) { return HookMeta(g_recorder, key, value); }
}  // namespace
}  // namespace rankscope::collector

RANKSCOPE_EXPORT int rankscope_hook_version() { return NoThrow<&HookVersion>::Call(); }
RANKSCOPE_EXPORT int rankscope_hook_active() { return NoThrow<&HookActive>::Call(); }
RANKSCOPE_EXPORT int rankscope_hook_range(const char* name, int64_t start_ns, int64_t end_ns, int role,
                                          const char* args_json) {
  return NoThrow<&HookRangeExported>::Call(name, start_ns, end_ns, role, args_json);
}
RANKSCOPE_EXPORT int rankscope_hook_collective(const char* name, const char* comm_name, int64_t start_ns,
                                               int64_t end_ns, uint64_t comm_hash, uint64_t sequence, int op,
                                               int reduce_op, int datatype, uint64_t bytes, int root, int peer,
                                               int comm_rank, int comm_size, const char* args_json) {
  return NoThrow<&HookCollectiveExported>::Call(name, comm_name, start_ns, end_ns, comm_hash, sequence, op,
                                                reduce_op, datatype, bytes, root, peer, comm_rank, comm_size,
                                                args_json);
}
RANKSCOPE_EXPORT int rankscope_hook_collective_begin(const char* name, const char* comm_name, int64_t start_ns,
                                                     uint64_t comm_hash, uint64_t sequence, int op, uint64_t bytes,
                                                     int root, int peer, int comm_rank, int comm_size) {
  return NoThrow<&HookCollectiveBeginExported>::Call(name, comm_name, start_ns, comm_hash, sequence, op, bytes, root,
                                                     peer, comm_rank, comm_size);
}
RANKSCOPE_EXPORT int rankscope_hook_meta(const char* key, const char* value) {
  return NoThrow<&HookMetaExported>::Call(key, value);
}

RANKSCOPE_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  return NoThrow<&StartNvtxInjection>::Call(get_export_table);
}

RANKSCOPE_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t* module_info) {
  return NoThrow<&StartNvtxExtension>::Call(module_info);
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

// The execl* bodies: building argv allocates, so they run behind NoThrow (a failed
// allocation returns -1 with malloc's ENOMEM, as exec's own failure would).
int ExeclBody(const char* path, const char* arg, va_list* list) {
  std::vector<char*> argv = ArgvFromList(arg, *list);
  return execv(path, argv.data());
}
int ExeclpBody(const char* file, const char* arg, va_list* list) {
  std::vector<char*> argv = ArgvFromList(arg, *list);
  return execvp(file, argv.data());
}
int ExecleBody(const char* path, const char* arg, va_list* list) {
  std::vector<char*> argv = ArgvFromList(arg, *list);
  char* const* envp = va_arg(*list, char* const*);
  return execve(path, argv.data(), envp);
}

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
  const int result = NoThrow<&ExeclBody, -1>::Call(path, arg, &list);
  va_end(list);
  return result;
}

RANKSCOPE_EXPORT int execlp(const char* file, const char* arg, ...) {
  va_list list;
  va_start(list, arg);
  const int result = NoThrow<&ExeclpBody, -1>::Call(file, arg, &list);
  va_end(list);
  return result;
}

RANKSCOPE_EXPORT int execle(const char* path, const char* arg, ...) {
  va_list list;
  va_start(list, arg);
  const int result = NoThrow<&ExecleBody, -1>::Call(path, arg, &list);
  va_end(list);
  return result;
}
