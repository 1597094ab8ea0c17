#include "trainer/gloo_group.h"

#include <unistd.h>

#include <atomic>
#include <climits>
#include <map>
#include <vector>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "base/text.h"
#include "trainer/comm_util.h"

namespace rankscope::trainer {
namespace {

using comm::CleanGlooMessage;
using comm::FormatDuration;
using comm::ExplainFailure;
using comm::RankList;

// How long a rank that saw a collective fail waits for the other survivors to say so: long
// enough for ranks whose peers' connections closed a moment later, short enough not to
// delay the error much.
constexpr auto kMissingRankGrace = std::chrono::milliseconds(2500);

// Slot prefixes of our own algorithms, beside gloo's (0x01-0x08 in gloo/types.h).
constexpr uint8_t kReduceScatterSlotPrefix = 0x40;
constexpr uint8_t kPointToPointSlotPrefix = 0x41;

// The reduction for gloo: out = a + b, element by element in a fixed order, so the ring
// all-reduce gives the same bits on every rank and every run.
void SumFloats(void* out, const void* a, const void* b, size_t count) {
  auto* sum = static_cast<float*>(out);
  const auto* left = static_cast<const float*>(a);
  const auto* right = static_cast<const float*>(b);
  for (size_t i = 0; i < count; ++i) sum[i] = left[i] + right[i];
}

// GLOO_SOCKET_IFNAME (as in PyTorch; the first of a comma-separated list) names the
// interface whose address the other ranks connect to. Without it, the address this host's
// name resolves to, and 127.0.0.1 if the name does not resolve (enough on one node only).
Result<std::shared_ptr<gloo::transport::Device>> CreateTcpDevice() {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') {
    std::string_view name(ifname);
    name = name.substr(0, name.find(','));
    gloo::transport::tcp::attr attr;
    attr.iface = std::string(name);
    try {
      return gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      return InvalidArgument(fmt::format("gloo: GLOO_SOCKET_IFNAME={}: {}", Printable(name),
                                         CleanGlooMessage(e.what())));
    }
  }
  char hostname[HOST_NAME_MAX + 1] = {};
  if (gethostname(hostname, sizeof hostname - 1) == 0 && hostname[0] != '\0') {
    try {
      return gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr(hostname));
    } catch (const std::exception&) {
      // The name does not resolve to an address this host can bind: fall back below.
    }
  }
  try {
    return gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr("127.0.0.1"));
  } catch (const std::exception& e) {
    return IoError(fmt::format("gloo: cannot create a TCP device on 127.0.0.1: {}",
                               CleanGlooMessage(e.what())));
  }
}

bool LooksLikeTimeout(std::string_view message) {
  return message.find("imed out") != std::string_view::npos ||
         message.find("imeout") != std::string_view::npos;
}

}  // namespace

struct GlooGroup::State {
  Rendezvous* rendezvous = nullptr;
  std::string name;  // the group's key namespace in the rendezvous store
  std::vector<int> members;  // world ranks of a group of some ranks; empty: all
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  uint32_t next_tag = 0;
  // Point-to-point messages sent to / received from each peer so far: the slot of the
  // k-th message between two ranks, the same number on both.
  std::map<int, uint32_t> sent_to;
  std::map<int, uint32_t> received_from;
  Status failure;  // set by the first failure; the group is unusable after it
  std::atomic<bool> busy{false};

  // Runs one collective with the next tag (every rank makes the same calls in the same
  // order, so the same call gets the same tag), turning whatever gloo throws into a Status.
  template <typename Collective>
  Status Run(std::string_view operation, Collective&& collective) {
    return Guarded(operation, [&] { collective(next_tag++); });
  }

  // Runs `call` alone on the context unless the group failed; a throw closes the group.
  template <typename Call>
  Status Guarded(std::string_view operation, Call&& call) {
    // A gloo context is not thread-safe: a second thread is refused, not let in to corrupt it.
    if (busy.exchange(true)) {
      return InternalError(fmt::format(
          "{}: the gloo group is in use by another thread (one thread at a time)", operation));
    }
    struct Release {
      std::atomic<bool>& flag;
      ~Release() { flag.store(false); }
    } release{busy};
    if (!failure.ok()) {
      return Status(failure.code(), fmt::format("{}: the group failed earlier: {}", operation,
                                                failure.message()));
    }
    std::string error;
    try {
      call();
      return Status::Ok();
    } catch (const std::exception& e) {
      error = CleanGlooMessage(e.what());
    } catch (...) {
      error = "unknown error";
    }
    return Fail(operation, error);
  }

  // Closes the group and explains the failure; never throws.
  Status Fail(std::string_view operation, const std::string& gloo_message) noexcept {
    // Close our connections first: peers blocked on this rank then fail at once instead of
    // at their timeout, and all survivors check in within the grace below.
    try {
      if (context) context->closeConnections();
    } catch (...) {
      // Closing a broken context may throw as well; it is dropped just below either way.
    }
    try {
      context.reset();
      device.reset();
      failure = Explain(operation, gloo_message);
    } catch (...) {
      failure = IoError(std::string(operation) + " failed");
    }
    return failure;
  }

  Status Explain(std::string_view operation, const std::string& gloo_message) {
    // One round per group, whatever failed: a rank that failed while connecting and one
    // that failed in its first collective are both survivors.
    return ExplainFailure({.operation = operation,
                           .timed_out = LooksLikeTimeout(gloo_message),
                           .timeout = timeout,
                           .missing = rendezvous->MissingRanks(
                               name + "/failed", std::min<std::chrono::milliseconds>(kMissingRankGrace, timeout),
                               members),
                           .detail = gloo_message,
                           .suffix = ""});
  }
};

GlooGroup::GlooGroup(std::unique_ptr<State> state) : state_(std::move(state)) {}

GlooGroup::~GlooGroup() {
  try {
    state_->context.reset();
    state_->device.reset();
  } catch (...) {
    // A destructor must not throw; the sockets close with the process at the latest.
  }
}

Result<std::unique_ptr<GlooGroup>> GlooGroup::Create(Rendezvous& rendezvous,
                                                     std::chrono::milliseconds timeout,
                                                     std::vector<int> members) try {
  if (timeout <= std::chrono::milliseconds::zero()) {
    return InvalidArgument("gloo: the timeout must be positive");
  }
  auto state = std::make_unique<State>();
  state->rendezvous = &rendezvous;
  state->rank = rendezvous.world().rank;
  state->size = rendezvous.world().world_size;
  state->timeout = timeout;
  std::string name_suffix;
  if (!members.empty()) {
    RS_ASSIGN_OR_RETURN(state->rank, comm::RankInGroup(members, rendezvous.world().rank, rendezvous.world().world_size));
    state->size = static_cast<int>(members.size());
    name_suffix = comm::GroupSuffix(members);
    state->members = std::move(members);
  }
  comm::IgnoreSigpipe();  // a peer that dies must fail our writes, not end this process
  try {
    state->name = rendezvous.NewNamespace("gloo") + name_suffix;
    RS_ASSIGN_OR_RETURN(state->device, CreateTcpDevice());
    state->context = std::make_shared<gloo::rendezvous::Context>(state->rank, state->size);
    state->context->setTimeout(timeout);
    gloo::rendezvous::PrefixStore store(state->name, rendezvous.store());
    state->context->connectFullMesh(store, state->device);
  } catch (const std::exception& e) {
    return state->Fail("gloo: connecting " + std::to_string(state->size) + " ranks",
                       CleanGlooMessage(e.what()));
  } catch (...) {
    return state->Fail("gloo: connecting " + std::to_string(state->size) + " ranks", "unknown error");
  }
  return std::unique_ptr<GlooGroup>(new GlooGroup(std::move(state)));
} catch (...) {
  return InternalError("gloo: creating the group: out of memory");
}

int GlooGroup::rank() const { return state_->rank; }

int GlooGroup::size() const { return state_->size; }

uint64_t GlooGroup::communicator_id() const {
  return comm::Fnv1a64(fmt::format("{}/{}", state_->name, state_->size));
}

// The only exception that can reach these from outside Run is std::bad_alloc while
// building a message.
Status GlooGroup::AllReduceSum(float* data, size_t count) try {
  if (count == 0) return Status::Ok();
  if (data == nullptr) return InvalidArgument("all-reduce: no data for a non-empty buffer");
  return state_->Run("all-reduce", [&](uint32_t tag) {
    gloo::AllreduceOptions options(state_->context);
    options.setOutput(data, count);
    options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    options.setReduceFunction(&SumFloats);
    options.setTag(tag);
    options.setTimeout(state_->timeout);
    gloo::allreduce(options);
  });
} catch (...) {
  return InternalError("all-reduce: out of memory");
}

Status GlooGroup::Broadcast(float* data, size_t count, int root) try {
  if (root < 0 || root >= state_->size) {
    return InvalidArgument(fmt::format("broadcast: root {} is not a rank of {}", root, state_->size));
  }
  if (count == 0) return Status::Ok();
  if (data == nullptr) return InvalidArgument("broadcast: no data for a non-empty buffer");
  return state_->Run("broadcast", [&](uint32_t tag) {
    gloo::BroadcastOptions options(state_->context);
    options.setOutput(data, count);
    options.setRoot(root);
    options.setTag(tag);
    options.setTimeout(state_->timeout);
    gloo::broadcast(options);
  });
} catch (...) {
  return InternalError("broadcast: out of memory");
}

Status GlooGroup::AllGather(const float* in, float* out, size_t count) try {
  if (count == 0) return Status::Ok();
  if (in == nullptr || out == nullptr) return InvalidArgument("all-gather: no data for a non-empty buffer");
  return state_->Run("all-gather", [&](uint32_t tag) {
    gloo::AllgatherOptions options(state_->context);
    options.setInput(const_cast<float*>(in), count);  // gloo only reads it
    options.setOutput(out, count * static_cast<size_t>(state_->size));
    options.setTag(tag);
    options.setTimeout(state_->timeout);
    gloo::allgather(options);
  });
} catch (...) {
  return InternalError("all-gather: out of memory");
}

Status GlooGroup::ReduceScatterSum(float* data, size_t count) try {
  if (count == 0) return Status::Ok();
  if (data == nullptr) return InvalidArgument("reduce-scatter: no data for a non-empty buffer");
  const int size = state_->size;
  if (size == 1) return Status::Ok();
  std::vector<float> incoming(count);
  return state_->Run("reduce-scatter", [&](uint32_t tag) {
    // Ring: at step s rank r sends its partial sum of block r-s-1 to rank r+1 and adds the
    // partial sum of block r-s-2 from rank r-1 to its own; after size-1 steps block r is
    // whole on rank r. Each step's slot is the call's, plus the step.
    const int rank = state_->rank;
    const int right = (rank + 1) % size;
    const int left = (rank + size - 1) % size;
    const size_t bytes = count * sizeof(float);
    auto send = state_->context->createUnboundBuffer(data, bytes * static_cast<size_t>(size));
    auto receive = state_->context->createUnboundBuffer(incoming.data(), bytes);
    const uint64_t base = gloo::Slot::build(kReduceScatterSlotPrefix, tag);
    for (int step = 0; step + 1 < size; ++step) {
      const auto sent_block = static_cast<size_t>((rank - step - 1 + 2 * size) % size);
      const auto received_block = static_cast<size_t>((rank - step - 2 + 2 * size) % size);
      send->send(right, base + static_cast<uint64_t>(step), sent_block * bytes, bytes);
      receive->recv(left, base + static_cast<uint64_t>(step), 0, bytes);
      receive->waitRecv(state_->timeout);
      send->waitSend(state_->timeout);
      float* target = data + received_block * count;
      for (size_t i = 0; i < count; ++i) target[i] += incoming[i];
    }
  });
} catch (...) {
  return InternalError("reduce-scatter: out of memory");
}

Status GlooGroup::Send(const float* data, size_t count, int peer) {
  return SendRecv(data, count, peer, nullptr, 0, -1);
}

Status GlooGroup::Recv(float* data, size_t count, int peer) { return SendRecv(nullptr, 0, -1, data, count, peer); }

Status GlooGroup::SendRecv(const float* send_data, size_t send_count, int send_peer, float* recv_data,
                           size_t recv_count, int recv_peer) try {
  // A half with no peer is absent; a half with a peer must name another rank, even empty.
  const auto check = [&](const char* what, const void* data, size_t count, int peer) -> Status {
    if (count == 0 && peer == -1) return Status::Ok();
    if (peer < 0 || peer >= state_->size || peer == state_->rank) {
      return InvalidArgument(fmt::format("{}: peer {} is not another rank of {}", what, peer, state_->size));
    }
    if (count > 0 && data == nullptr) return InvalidArgument(fmt::format("{}: no data for a non-empty buffer", what));
    return Status::Ok();
  };
  RS_RETURN_IF_ERROR(check("send", send_data, send_count, send_peer));
  RS_RETURN_IF_ERROR(check("receive", recv_data, recv_count, recv_peer));
  if (send_count == 0 && recv_count == 0) return Status::Ok();
  const char* operation = send_count == 0 ? "receive" : recv_count == 0 ? "send" : "send and receive";
  return state_->Guarded(operation, [&] {
    std::unique_ptr<gloo::transport::UnboundBuffer> out;
    std::unique_ptr<gloo::transport::UnboundBuffer> in;
    if (send_count > 0) {
      out = state_->context->createUnboundBuffer(const_cast<float*>(send_data), send_count * sizeof(float));
      out->send(send_peer, gloo::Slot::build(kPointToPointSlotPrefix, state_->sent_to[send_peer]++));
    }
    if (recv_count > 0) {
      in = state_->context->createUnboundBuffer(recv_data, recv_count * sizeof(float));
      in->recv(recv_peer, gloo::Slot::build(kPointToPointSlotPrefix, state_->received_from[recv_peer]++));
      in->waitRecv(state_->timeout);
    }
    if (out) out->waitSend(state_->timeout);
  });
} catch (...) {
  return InternalError("send or receive: out of memory");
}

Status GlooGroup::Barrier() try {
  return state_->Run("barrier", [&](uint32_t tag) {
    gloo::BarrierOptions options(state_->context);
    options.setTag(tag);
    options.setTimeout(state_->timeout);
    gloo::barrier(options);
  });
} catch (...) {
  return InternalError("barrier: out of memory");
}

}  // namespace rankscope::trainer
