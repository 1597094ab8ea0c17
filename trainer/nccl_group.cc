#include "trainer/nccl_group.h"

#include <climits>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nccl.h>

#include "trainer/comm_util.h"

namespace rankscope::trainer {
namespace {

using Clock = std::chrono::steady_clock;
using comm::FormatDuration;
using comm::ExplainFailure;
using comm::RankList;

// Polling a stream or a communicator's state costs microseconds; this keeps a waiting
// thread from spinning a core while adding little latency to a millisecond collective.
constexpr auto kPollInterval = std::chrono::microseconds(200);
constexpr auto kMissingRankGrace = std::chrono::milliseconds(2500);

// NCCL's error name and its last detailed message, on one line.
std::string NcclErrorText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && *detail != '\0') {
    std::string one_line(detail);
    for (char& c : one_line) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    text += fmt::format(" ({})", one_line);
  }
  return text;
}

// With a non-blocking communicator (config.blocking = 0) calls may return ncclInProgress;
// the communicator's state says when they are done. Returns the final state, or
// ncclInProgress when `deadline` passed first.
ncclResult_t WaitWhileInProgress(ncclComm_t comm, Clock::time_point deadline) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) return queried;
    if (state != ncclInProgress) return state;
    if (Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(kPollInterval);
  }
}

// The calling thread's CUDA device is switched for a scope and switched back after it.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) {
      switched_ = cudaSetDevice(device) == cudaSuccess;
    }
  }
  ~ScopedDevice() {
    if (switched_) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace

struct NcclGroup::State {
  Rendezvous* rendezvous = nullptr;
  std::string name;  // the group's key namespace in the rendezvous store
  std::vector<int> members;  // world ranks of a group of some ranks; empty: all
  int rank = 0;
  int size = 1;
  int device = 0;
  std::chrono::milliseconds timeout{0};
  ncclComm_t comm = nullptr;
  Status failure;  // set by the first failure; the communicator is aborted then

  Status FailedEarlier(std::string_view operation) const {
    return Status(failure.code(),
                  fmt::format("{}: the NCCL group failed earlier: {}", operation, failure.message()));
  }

  // Aborts the communicator (so that no kernel waits forever on a dead peer), names the
  // ranks that did not check in as survivors, and remembers the error.
  Status Fail(std::string_view operation, const std::string& reason, bool timed_out) noexcept {
    if (comm != nullptr) {
      ncclCommAbort(comm);
      comm = nullptr;
    }
    try {
      failure = Explain(operation, reason, timed_out);
    } catch (...) {
      failure = IoError("NCCL operation failed; communicator aborted");
    }
    return failure;
  }

  Status Explain(std::string_view operation, const std::string& reason, bool timed_out) {
    return ExplainFailure({.operation = operation,
                           .timed_out = timed_out,
                           .timeout = timeout,
                           .missing = rendezvous->MissingRanks(
                               name + "/failed", std::min<std::chrono::milliseconds>(kMissingRankGrace, timeout),
                               members),
                           .detail = reason,
                           .suffix = "; communicator aborted"});
  }

  // After enqueueing a collective: ncclInProgress means the non-blocking communicator is
  // still taking the call; wait for that (not for the collective itself).
  Status Enqueued(std::string_view operation, ncclResult_t result) {
    if (result == ncclInProgress) {
      result = WaitWhileInProgress(comm, Clock::now() + timeout);
      if (result == ncclInProgress) {
        return Fail(operation, "enqueueing did not finish", /*timed_out=*/true);
      }
    }
    if (result != ncclSuccess) return Fail(operation, NcclErrorText(result, comm), false);
    return Status::Ok();
  }
};

NcclGroup::NcclGroup(std::unique_ptr<State> state) : state_(std::move(state)) {}

NcclGroup::~NcclGroup() {
  if (state_->comm == nullptr) return;
  ScopedDevice on_device(state_->device);
  if (state_->failure.ok()) {
    // Finalize flushes outstanding work; if a peer is gone it never finishes, then abort.
    ncclResult_t result = ncclCommFinalize(state_->comm);
    if (result == ncclSuccess || result == ncclInProgress) {
      result = WaitWhileInProgress(state_->comm, Clock::now() + state_->timeout);
    }
    if (result == ncclSuccess) {
      ncclCommDestroy(state_->comm);
      state_->comm = nullptr;
      return;
    }
  }
  ncclCommAbort(state_->comm);
  state_->comm = nullptr;
}

Result<std::unique_ptr<NcclGroup>> NcclGroup::Create(Rendezvous& rendezvous, int device,
                                                     std::chrono::milliseconds timeout, std::vector<int> members) {
  if (timeout <= std::chrono::milliseconds::zero()) {
    return InvalidArgument("nccl: the timeout must be positive");
  }
  try {
    int current = -1;
    const cudaError_t cuda = cudaGetDevice(&current);
    if (cuda != cudaSuccess) {
      return Unavailable(fmt::format("nccl: no usable CUDA device: {}", cudaGetErrorString(cuda)));
    }
    if (current != device) {
      return InvalidArgument(fmt::format(
          "nccl: this thread uses CUDA device {}, not {}: call cudaSetDevice({}) first", current,
          device, device));
    }
    auto state = std::make_unique<State>();
    state->rendezvous = &rendezvous;
    state->rank = rendezvous.world().rank;
    state->size = rendezvous.world().world_size;
    state->device = device;
    state->timeout = timeout;
    std::string name_suffix;
    if (!members.empty()) {
      RS_ASSIGN_OR_RETURN(state->rank,
                          comm::RankInGroup(members, rendezvous.world().rank, rendezvous.world().world_size));
      state->size = static_cast<int>(members.size());
      name_suffix = comm::GroupSuffix(members);
      state->members = std::move(members);
    }
    state->name = rendezvous.NewNamespace("nccl") + name_suffix;
    const std::string id_key = state->name + "/id";

    // Rank 0 publishes the id; an empty value tells the others that it could not make one,
    // so that they fail at once instead of at the timeout.
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (state->rank == 0) {
      const ncclResult_t made = ncclGetUniqueId(&id);
      if (made != ncclSuccess) {
        (void)rendezvous.Set(id_key, {});
        return Unavailable(fmt::format("nccl: ncclGetUniqueId failed: {}", NcclErrorText(made, nullptr)));
      }
      const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
      RS_RETURN_IF_ERROR(rendezvous.Set(id_key, std::span<const uint8_t>(bytes, sizeof id)));
    } else {
      RS_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, rendezvous.Get(id_key));
      if (bytes.empty()) return Unavailable("nccl: rank 0 could not create an NCCL unique id");
      if (bytes.size() != sizeof id) {
        return Corrupt(fmt::format("nccl: the NCCL unique id from rank 0 has {} bytes, not {}",
                                   bytes.size(), sizeof id));
      }
      std::memcpy(&id, bytes.data(), sizeof id);
    }

    // Non-blocking, so that a rank that never joins cannot hang this one past the timeout.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclCommInitRankConfig(&comm, state->size, id, state->rank, &config);
    if (comm != nullptr && (result == ncclSuccess || result == ncclInProgress)) {
      result = WaitWhileInProgress(comm, Clock::now() + timeout);
    }
    if (result != ncclSuccess) {
      const bool timed_out = result == ncclInProgress;
      const std::string reason = timed_out ? std::string("not every rank joined")
                                           : NcclErrorText(result, comm);
      if (comm != nullptr) ncclCommAbort(comm);
      const std::vector<int> missing = rendezvous.MissingRanks(
          state->name + "/init-failed", std::min<std::chrono::milliseconds>(kMissingRankGrace, timeout),
          state->members);
      const std::string head = timed_out ? fmt::format("nccl: creating the communicator of {} ranks timed out after {}",
                                                       state->size, FormatDuration(timeout))
                                         : fmt::format("nccl: creating the communicator of {} ranks failed",
                                                       state->size);
      if (!missing.empty()) {
        return Unavailable(fmt::format("{}: {} did not respond ({})", head, RankList(missing), reason));
      }
      return IoError(fmt::format("{}: {}", head, reason));
    }
    state->comm = comm;
    return std::unique_ptr<NcclGroup>(new NcclGroup(std::move(state)));
  } catch (...) {  // only std::bad_alloc can get here: NCCL and CUDA are C APIs
    return InternalError("nccl: creating the communicator: out of memory");
  }
}

Status NcclGroup::AllReduceAverage(float* device_data, size_t count, cudaStream_t stream) {
  try {
    if (!state_->failure.ok()) return state_->FailedEarlier("all-reduce");
    if (count == 0) return Status::Ok();
    if (device_data == nullptr) return InvalidArgument("all-reduce: no data for a non-empty buffer");
    return state_->Enqueued("all-reduce", ncclAllReduce(device_data, device_data, count, ncclFloat,
                                                        ncclAvg, state_->comm, stream));
  } catch (...) {
    return InternalError("all-reduce: out of memory");
  }
}

Status NcclGroup::Broadcast(float* device_data, size_t count, int root, cudaStream_t stream) {
  try {
    if (!state_->failure.ok()) return state_->FailedEarlier("broadcast");
    if (root < 0 || root >= state_->size) {
      return InvalidArgument(fmt::format("broadcast: root {} is not a rank of {}", root, state_->size));
    }
    if (count == 0) return Status::Ok();
    if (device_data == nullptr) return InvalidArgument("broadcast: no data for a non-empty buffer");
    return state_->Enqueued("broadcast", ncclBroadcast(device_data, device_data, count, ncclFloat,
                                                       root, state_->comm, stream));
  } catch (...) {
    return InternalError("broadcast: out of memory");
  }
}

Status NcclGroup::AllGather(const float* device_in, float* device_out, size_t count, cudaStream_t stream) {
  try {
    if (!state_->failure.ok()) return state_->FailedEarlier("all-gather");
    if (count == 0) return Status::Ok();
    if (device_in == nullptr || device_out == nullptr) {
      return InvalidArgument("all-gather: no data for a non-empty buffer");
    }
    return state_->Enqueued("all-gather", ncclAllGather(device_in, device_out, count, ncclFloat, state_->comm, stream));
  } catch (...) {
    return InternalError("all-gather: out of memory");
  }
}

Status NcclGroup::ReduceScatterAverage(float* device_data, size_t count, cudaStream_t stream) {
  try {
    if (!state_->failure.ok()) return state_->FailedEarlier("reduce-scatter");
    if (count == 0) return Status::Ok();
    if (device_data == nullptr) return InvalidArgument("reduce-scatter: no data for a non-empty buffer");
    // In place: the receive buffer is this rank's block of the send buffer, as NCCL allows.
    float* mine = device_data + static_cast<size_t>(state_->rank) * count;
    return state_->Enqueued("reduce-scatter", ncclReduceScatter(device_data, mine, count, ncclFloat, ncclAvg,
                                                                state_->comm, stream));
  } catch (...) {
    return InternalError("reduce-scatter: out of memory");
  }
}

Status NcclGroup::Send(const float* device_data, size_t count, int peer, cudaStream_t stream) {
  return SendRecv(device_data, count, peer, nullptr, 0, -1, stream);
}

Status NcclGroup::Recv(float* device_data, size_t count, int peer, cudaStream_t stream) {
  return SendRecv(nullptr, 0, -1, device_data, count, peer, stream);
}

Status NcclGroup::SendRecv(const float* send_data, size_t send_count, int send_peer, float* recv_data,
                           size_t recv_count, int recv_peer, cudaStream_t stream) {
  const char* const kOperation = send_count == 0 ? "receive" : recv_count == 0 ? "send" : "send and receive";
  try {
    if (!state_->failure.ok()) return state_->FailedEarlier(kOperation);
    // A half with no peer is absent; a half with a peer must name another rank, even empty.
    const auto check = [&](const char* what, const void* data, size_t count, int peer) -> Status {
      if (count == 0 && peer == -1) return Status::Ok();
      if (peer < 0 || peer >= state_->size || peer == state_->rank) {
        return InvalidArgument(fmt::format("{}: peer {} is not another rank of {}", what, peer, state_->size));
      }
      if (count > 0 && data == nullptr) {
        return InvalidArgument(fmt::format("{}: no data for a non-empty buffer", what));
      }
      return Status::Ok();
    };
    RS_RETURN_IF_ERROR(check("send", send_data, send_count, send_peer));
    RS_RETURN_IF_ERROR(check("receive", recv_data, recv_count, recv_peer));
    if (send_count == 0 && recv_count == 0) return Status::Ok();
    // One group call: NCCL schedules both together, so neither waits for the other's match.
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return state_->Enqueued(kOperation, result);
    if (send_count > 0) {
      // NCCL only reads a buffer it sends.
      result = ncclSend(send_data, send_count, ncclFloat, send_peer, state_->comm, stream);
    }
    // A non-blocking communicator may answer ncclInProgress; the group's end settles it.
    const auto fine = [](ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; };
    if (fine(result) && recv_count > 0) {
      result = ncclRecv(recv_data, recv_count, ncclFloat, recv_peer, state_->comm, stream);
    }
    const ncclResult_t ended = ncclGroupEnd();
    return state_->Enqueued(kOperation, fine(result) ? ended : result);
  } catch (...) {
    return InternalError("send or receive: out of memory");
  }
}

Status NcclGroup::Synchronize(cudaStream_t stream) {
  try {
    if (!state_->failure.ok()) return state_->FailedEarlier("synchronize");
    const Clock::time_point deadline = Clock::now() + state_->timeout;
    while (true) {
      const cudaError_t query = cudaStreamQuery(stream);
      ncclResult_t state = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(state_->comm, &state);
      if (queried != ncclSuccess) {
        return state_->Fail("NCCL synchronize", NcclErrorText(queried, state_->comm), false);
      }
      if (state != ncclSuccess && state != ncclInProgress) {
        return state_->Fail("NCCL synchronize", NcclErrorText(state, state_->comm), false);
      }
      if (query == cudaSuccess) return Status::Ok();
      if (query != cudaErrorNotReady) {
        return state_->Fail("NCCL synchronize",
                            fmt::format("CUDA error: {}", cudaGetErrorString(query)), false);
      }
      if (Clock::now() >= deadline) {
        return state_->Fail("NCCL synchronize", "the stream did not finish", /*timed_out=*/true);
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  } catch (...) {
    return InternalError("NCCL synchronize: out of memory");
  }
}

}  // namespace rankscope::trainer
