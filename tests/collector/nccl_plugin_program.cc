// One rank of a training loop whose NCCL is played by this program: it drives the injected
// collector's NCCL profiler plugin (`ncclProfiler_v5`, found with dlsym) with the calls NCCL
// makes, and marks its CPU work with NVTX as the reference trainer's CPU path does. Run it
// under `rankscope profile -n N` (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from
// there).
//
// Per step: a "step" range (payload schema "rankscope step"), a "compute" range (category
// "compute"), then an AllReduce on the shared communicator, sequence number = step, with two
// kernel channels whose GPU timers read CLOCK_REALTIME. Rank 1 computes 20 ms longer, so it
// arrives 20 ms after the others at every AllReduce, and every rank's kernels end together
// 3 ms after it arrived, as a real collective would. The ranks agree on the start of step 0
// through a TCP rendezvous at MASTER_ADDR:MASTER_PORT, so the schedule holds across
// processes. After the steps, rank 0 sends to rank 1 on a communicator of their own.
//
// Exit status: 0 done, 1 a failure (one line on stderr), 2 no plugin in the process.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collector/nccl_profiler_abi.h"
#include "step_payload.h"
#include "nvtx_attributes.h"

namespace {

namespace nccl_abi = rankscope::collector::nccl_abi;
using rankscope::collector::testing::RegisterStepSchema;
using rankscope::collector::testing::StepPayload;

constexpr uint64_t kWorldCommHash = 0x7A11DEC0DE5EED01;  // the same on every rank, as NCCL's
constexpr uint64_t kPairCommHash = 0x7A11DEC0DE5EED02;   // ranks 0 and 1 only
constexpr int kSteps = 6;
constexpr int64_t kStepNs = 40'000'000;
constexpr int64_t kComputeNs = 8'000'000;
constexpr int64_t kStragglerNs = 20'000'000;  // rank 1's extra compute
constexpr int64_t kTransferNs = 3'000'000;
constexpr size_t kElements = 1 << 20;  // float32: 4 MiB per AllReduce
constexpr uint64_t kSamplesPerStep = 16;
constexpr int kStragglerRank = 1;

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void SleepUntil(int64_t deadline_ns) {
  const timespec until{static_cast<time_t>(deadline_ns / 1'000'000'000),
                       static_cast<long>(deadline_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
}

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "nccl_plugin_program: %s\n", message.c_str());
  std::exit(1);
}

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

bool SendAll(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = send(fd, bytes, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReceiveAll(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = recv(fd, bytes, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The start of step 0 on CLOCK_REALTIME, the same on every rank: rank 0 picks it and tells
// the others, who connect to it as torch's rendezvous store would be reached.
int64_t AgreeOnStart(int rank, int world_size) {
  constexpr int64_t kLead = 100'000'000;  // time for every rank to get the news
  if (world_size <= 1) return NowNs() + kLead;
  const char* address = std::getenv("MASTER_ADDR");
  const int port = EnvInt("MASTER_PORT", 0);
  if (port <= 0) Fail("MASTER_PORT is not set");
  sockaddr_in socket_address{};
  socket_address.sin_family = AF_INET;
  socket_address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address != nullptr ? address : "127.0.0.1", &socket_address.sin_addr) != 1) {
    Fail("MASTER_ADDR is not an IPv4 address");
  }
  auto* generic = reinterpret_cast<sockaddr*>(&socket_address);
  if (rank == 0) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int on = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (listener < 0 || bind(listener, generic, sizeof(socket_address)) != 0 || listen(listener, world_size) != 0) {
      Fail(std::string("cannot listen on MASTER_PORT: ") + std::strerror(errno));
    }
    std::vector<int> peers;
    for (int i = 1; i < world_size; ++i) {
      const int peer = accept(listener, nullptr, nullptr);
      if (peer < 0) Fail(std::string("accept: ") + std::strerror(errno));
      peers.push_back(peer);
    }
    const int64_t start = NowNs() + kLead;
    for (int peer : peers) {
      if (!SendAll(peer, &start, sizeof(start))) Fail("cannot send the start time");
      close(peer);
    }
    close(listener);
    return start;
  }
  // Rank 0 may not listen yet: retry for up to 30 s.
  for (int attempt = 0; attempt < 3000; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) Fail(std::string("socket: ") + std::strerror(errno));
    if (connect(fd, generic, sizeof(socket_address)) == 0) {
      int64_t start = 0;
      if (!ReceiveAll(fd, &start, sizeof(start))) Fail("rank 0 closed the rendezvous without a start time");
      close(fd);
      return start;
    }
    close(fd);
    usleep(10'000);
  }
  Fail("rank 0 never answered at MASTER_ADDR:MASTER_PORT");
}

// ---- NVTX, as trainer/annotations.cc marks the CPU path --------------------------------------

constexpr uint32_t kComputeCategory = 1;
constexpr uint32_t kCommCategory = 2;

struct Annotations {
  nvtxDomainHandle_t domain = nullptr;
  uint64_t step_schema = 0;
};

Annotations InitAnnotations() {
  Annotations annotations;
  annotations.domain = nvtxDomainCreateA("rankscope");
  nvtxDomainNameCategoryA(annotations.domain, kComputeCategory, "compute");
  nvtxDomainNameCategoryA(annotations.domain, kCommCategory, "comm");
  annotations.step_schema = RegisterStepSchema(annotations.domain);
  return annotations;
}


void PushStep(const Annotations& annotations, uint64_t step) {
  const StepPayload payload{step, kSamplesPerStep};
  nvtxPayloadData_t data{annotations.step_schema, sizeof(payload), &payload};
  nvtxEventAttributes_t attributes = rankscope::testing::NvtxAttributes("step", 0);
  attributes.payloadType = NVTX_PAYLOAD_TYPE_EXT;
  attributes.reserved0 = 1;  // one nvtxPayloadData_t
  attributes.payload.ullValue = reinterpret_cast<uint64_t>(&data);
  nvtxDomainRangePushEx(annotations.domain, &attributes);
}

void PushCompute(const Annotations& annotations) {
  const nvtxEventAttributes_t attributes = rankscope::testing::NvtxAttributes("compute", kComputeCategory);
  nvtxDomainRangePushEx(annotations.domain, &attributes);
}

void Pop(const Annotations& annotations) { nvtxDomainRangePop(annotations.domain); }

// ---- NCCL --------------------------------------------------------------------------------------

class Nccl {
 public:
  explicit Nccl(const nccl_abi::ProfilerV5* plugin) : plugin_(plugin) {}

  void* Init(uint64_t comm_hash, const char* name, int ranks, int rank) {
    void* context = nullptr;
    int mask = 0;
    if (plugin_->init(&context, comm_hash, &mask, name, 1, ranks, rank, nullptr) != nccl_abi::kSuccess) {
      Fail(std::string("the plugin refused communicator ") + name);
    }
    if ((mask & nccl_abi::kColl) == 0 || (mask & nccl_abi::kKernelCh) == 0) Fail("the plugin asked for no collectives");
    return context;
  }

  void* Start(void* context, nccl_abi::EventDescrV5& descr) {
    void* handle = nullptr;
    plugin_->start_event(context, &handle, &descr);
    return handle;
  }

  void Stop(void* handle) {
    if (handle != nullptr) plugin_->stop_event(handle);
  }

  // An operation already enqueued (`operation`, stopped) runs on the GPU from `gpu_start` to
  // `gpu_stop`, both CLOCK_REALTIME, on `channels` channels: the proxy reports each channel's
  // start once it began and its stop once it ended.
  void RunKernel(void* context, void* operation, int channels, int64_t gpu_start, int64_t gpu_stop) {
    std::vector<void*> handles;
    SleepUntil(gpu_start);
    for (int c = 0; c < channels; ++c) {
      nccl_abi::EventDescrV5 channel{};
      channel.type = nccl_abi::kKernelCh;
      channel.parent = operation;
      channel.kernel_ch.channel = static_cast<uint8_t>(c);
      channel.kernel_ch.gpu_timer = static_cast<uint64_t>(gpu_start);
      handles.push_back(Start(context, channel));
    }
    SleepUntil(gpu_stop);
    for (void* handle : handles) {
      nccl_abi::StateArgsV5 args{};
      args.kernel_ch.gpu_timer = static_cast<uint64_t>(gpu_stop);
      if (handle != nullptr) plugin_->record_event_state(handle, nccl_abi::kKernelChStop, &args);
      Stop(handle);
    }
  }

  void Finalize(void* context) { plugin_->finalize(context); }

 private:
  const nccl_abi::ProfilerV5* plugin_;
};

}  // namespace

int main() {
  const auto* plugin = static_cast<const nccl_abi::ProfilerV5*>(dlsym(RTLD_DEFAULT, "ncclProfiler_v5"));
  if (plugin == nullptr) {
    std::fprintf(stderr, "nccl_plugin_program: no ncclProfiler_v5 in this process (is the collector preloaded?)\n");
    return 2;
  }
  const int rank = EnvInt("RANK", 0);
  const int world_size = EnvInt("WORLD_SIZE", 1);
  if (rank < 0 || world_size < 1 || rank >= world_size) Fail("RANK and WORLD_SIZE do not fit");

  const Annotations annotations = InitAnnotations();
  Nccl nccl(plugin);
  void* world = nccl.Init(kWorldCommHash, "world", world_size, rank);
  const int64_t start = AgreeOnStart(rank, world_size);

  for (int step = 0; step < kSteps; ++step) {
    const int64_t step_start = start + step * kStepNs;
    SleepUntil(step_start);
    PushStep(annotations, static_cast<uint64_t>(step));
    PushCompute(annotations);
    const int64_t arrival = step_start + kComputeNs + (rank == kStragglerRank ? kStragglerNs : 0);
    SleepUntil(arrival);
    Pop(annotations);

    nccl_abi::EventDescrV5 allreduce{};
    allreduce.type = nccl_abi::kColl;
    allreduce.rank = rank;
    allreduce.coll.seq_number = static_cast<uint64_t>(step);
    allreduce.coll.func = "AllReduce";
    allreduce.coll.count = kElements;
    allreduce.coll.root = 0;
    allreduce.coll.datatype = "ncclFloat32";
    allreduce.coll.channels = 2;
    allreduce.coll.warps = 16;
    allreduce.coll.algo = "RING";
    allreduce.coll.proto = "SIMPLE";
    void* operation = nccl.Start(world, allreduce);
    nccl.Stop(operation);  // enqueued
    // Every rank's kernel waits in the collective for the last one to arrive.
    const int64_t last_arrival = step_start + kComputeNs + (world_size > kStragglerRank ? kStragglerNs : 0);
    nccl.RunKernel(world, operation, 2, arrival, last_arrival + kTransferNs);
    Pop(annotations);
  }

  // Point-to-point, on a communicator of the pair (as PyTorch makes one per pair of ranks).
  if (world_size >= 2 && rank <= 1) {
    void* pair = nccl.Init(kPairCommHash, "pair 0:1", 2, rank);
    nccl_abi::EventDescrV5 p2p{};
    p2p.type = nccl_abi::kP2p;
    p2p.rank = rank;
    p2p.p2p.func = rank == 0 ? "Send" : "Recv";
    p2p.p2p.count = 1024;
    p2p.p2p.datatype = "ncclFloat32";
    p2p.p2p.peer = 1 - rank;
    p2p.p2p.channels = 1;
    void* operation = nccl.Start(pair, p2p);
    nccl.Stop(operation);
    const int64_t p2p_start = start + kSteps * kStepNs;
    nccl.RunKernel(pair, operation, 1, p2p_start, p2p_start + 1'000'000);
    nccl.Finalize(pair);
  }
  nccl.Finalize(world);
  return 0;
}
