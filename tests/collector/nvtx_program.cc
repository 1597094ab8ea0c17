// The program the collector tests run under the collector. Each mode exercises one part:
//   annotate  nested ranges in several threads and domains, marks, categories, payloads
//   spin      records ranges of category 1 ("compute") forever (until killed), printing "ready"
//             once events are committed
//   fork      a forked child records too; only the parent's events may appear
//   exec-quiet / exec-busy   exec this program in mode "after-exec", without / with events first
//   handler   installs its own SIGTERM handler before NVTX loads the collector, then waits
//   hang      inside a step, completes one `rankscope collective` all-reduce, enters a second
//             and never leaves it (until killed), printing "ready" once it is inside
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collective_payload.h"
#include "step_payload.h"

namespace {

using rankscope::collector::testing::CollectivePayload;
using rankscope::collector::testing::PushCollective;
using rankscope::collector::testing::RegisterCollectiveSchema;
using rankscope::collector::testing::RegisterStepSchema;
using rankscope::collector::testing::StepPayload;

constexpr int kSteps = 3;
constexpr int kWorkers = 3;
constexpr int kWorkerIterations = 100;

void PushWithAttributes(const char* name, uint32_t category, uint32_t color, uint64_t payload) {
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.category = category;
  attributes.colorType = color != 0 ? NVTX_COLOR_ARGB : NVTX_COLOR_UNKNOWN;
  attributes.color = color;
  attributes.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  attributes.payload.ullValue = payload;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name;
  nvtxRangePushEx(&attributes);
}

int Annotate() {
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), "main-thread");
  nvtxNameCategoryA(1, "compute");
  nvtxDomainHandle_t app = nvtxDomainCreateA("app");
  nvtxDomainNameCategoryA(app, 2, "io");
  nvtxDomainHandle_t rankscope = nvtxDomainCreateA("rankscope");
  nvtxStringHandle_t step_name = nvtxDomainRegisterStringA(rankscope, "step");
  uint64_t schema = RegisterStepSchema(rankscope);

  std::atomic<nvtxRangeId_t> io_wait{0};
  nvtxRangeId_t started = nvtxRangeStartA("io-wait");  // ends on worker 0
  io_wait.store(started);

  std::vector<std::thread> workers;
  std::atomic<int> ready{0};
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::string name = "worker-" + std::to_string(w);
      pthread_setname_np(pthread_self(), name.c_str());
      ready.fetch_add(1);
      for (int i = 0; i < kWorkerIterations; ++i) {
        nvtxEventAttributes_t attributes{};
        attributes.version = NVTX_VERSION;
        attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attributes.category = 2;
        attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
        attributes.message.ascii = "work";
        nvtxDomainRangePushEx(app, &attributes);
        nvtxRangePushA("inner");
        nvtxRangePop();
        nvtxDomainRangePop(app);
      }
      if (w == 0) nvtxRangeEnd(io_wait.load());
    });
  }
  for (int step = 0; step < kSteps; ++step) {
    StepPayload payload{static_cast<uint64_t>(step), 32u * (step + 1)};
    nvtxPayloadData_t data{schema, sizeof(payload), &payload};
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.payloadType = NVTX_PAYLOAD_TYPE_EXT;
    attributes.reserved0 = 1;
    attributes.payload.ullValue = reinterpret_cast<uint64_t>(&data);
    attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attributes.message.registered = step_name;
    nvtxDomainRangePushEx(rankscope, &attributes);
    PushWithAttributes("forward", 1, 0xFF00FF00u, 0);
    PushWithAttributes("matmul", 0, 0, static_cast<uint64_t>(step));
    nvtxRangePop();
    nvtxRangePop();
    if (step == 1) {
      nvtxEventAttributes_t mark{};
      mark.version = NVTX_VERSION;
      mark.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
      mark.payloadType = NVTX_PAYLOAD_TYPE_INT32;
      mark.payload.iValue = -5;
      mark.messageType = NVTX_MESSAGE_TYPE_ASCII;
      mark.message.ascii = "checkpoint";
      nvtxMarkEx(&mark);
    }
    nvtxDomainRangePop(rankscope);
  }
  nvtxRangePushW(L"wide-\u00fc");
  nvtxRangePop();
  for (auto& worker : workers) worker.join();
  return 0;
}

int Spin() {
  // A named category: a rank killed mid-run must keep the name with its ranges.
  nvtxNameCategoryA(1, "compute");
  for (long i = 0;; ++i) {
    PushWithAttributes("spin", 1, 0, static_cast<uint64_t>(i));
    nvtxRangePop();
    if (i == 1000) {
      usleep(600 * 1000);  // past the drain interval and the writer's commit interval
      std::printf("ready\n");
      std::fflush(stdout);
    }
    if (i > 1000) usleep(100);
  }
}

int Fork() {
  nvtxRangePushA("parent-before");
  nvtxRangePop();
  pid_t child = fork();
  if (child == 0) {
    nvtxRangePushA("child");
    nvtxRangePop();
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  nvtxRangePushA("parent-after");
  nvtxRangePop();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int Exec(const char* self, bool events_first) {
  if (events_first) {
    nvtxRangePushA("before-exec");
    nvtxRangePop();
  }
  execl(self, self, "after-exec", static_cast<char*>(nullptr));
  std::perror("execl");
  return 1;
}

int AfterExec() {
  nvtxRangePushA("after-exec");
  nvtxRangePop();
  return 0;
}

volatile sig_atomic_t g_terminated = 0;
void OnTerm(int) { g_terminated = 1; }

int Handler() {
  signal(SIGTERM, &OnTerm);
  nvtxRangePushA("waiting");  // loads the collector (not preloaded in this mode)
  std::printf("ready\n");
  std::fflush(stdout);
  while (!g_terminated) usleep(1000);
  nvtxRangePop();
  return 3;
}

int Hang() {
  nvtxDomainHandle_t rankscope = nvtxDomainCreateA("rankscope");
  const uint64_t schema = RegisterCollectiveSchema(rankscope);
  const uint64_t comm = 0x9E3779B97F4A7C15;
  nvtxEventAttributes_t step{};
  step.version = NVTX_VERSION;
  step.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  step.messageType = NVTX_MESSAGE_TYPE_ASCII;
  step.message.ascii = "step";
  nvtxDomainRangePushEx(rankscope, &step);
  PushCollective(rankscope, schema, "allreduce", {comm, 0, 4096, -1, -1, 0, 2});
  nvtxDomainRangePop(rankscope);
  PushCollective(rankscope, schema, "allreduce", {comm, 1, 4096, -1, -1, 0, 2});  // its peer never comes
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "annotate";
  if (mode == "annotate") return Annotate();
  if (mode == "spin") return Spin();
  if (mode == "fork") return Fork();
  if (mode == "exec-quiet") return Exec(argv[0], false);
  if (mode == "exec-busy") return Exec(argv[0], true);
  if (mode == "after-exec") return AfterExec();
  if (mode == "handler") return Handler();
  if (mode == "hang") return Hang();
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
