// Stands in for a rank with the collector injected: writes <RANKSCOPE_RUN_DIR>/rank-<RANK>.sqlite
// (rank-unknown-<pid>.sqlite without RANK) holding argv[1] kernel events and argv[2] drops,
// under RANKSCOPE_RUN_ID, then exits with argv[3] (default 0).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "trace/run_dir.h"
#include "trace/writer.h"

using namespace rankscope::trace;

namespace {
std::optional<int> IntFromEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::atoi(value);
}
}  // namespace

int main(int argc, char** argv) {
  const char* run_dir = std::getenv("RANKSCOPE_RUN_DIR");
  const char* run_id = std::getenv("RANKSCOPE_RUN_ID");
  if (run_dir == nullptr || run_id == nullptr) {
    std::fprintf(stderr, "fake_rank: RANKSCOPE_RUN_DIR and RANKSCOPE_RUN_ID must be set\n");
    return 100;
  }
  const int events = argc > 1 ? std::atoi(argv[1]) : 10;
  const int drops = argc > 2 ? std::atoi(argv[2]) : 0;
  const int exit_code = argc > 3 ? std::atoi(argv[3]) : 0;

  RankIdentity who;
  who.run_id = run_id;
  who.rank = IntFromEnv("RANK");
  who.world_size = IntFromEnv("WORLD_SIZE");
  who.local_rank = IntFromEnv("LOCAL_RANK");
  who.pid = getpid();
  const std::filesystem::path file =
      std::filesystem::path(run_dir) / (who.rank ? RankFileName(*who.rank) : UnknownRankFileName(who.pid));
  auto writer = TraceWriter::Create(file, who);
  if (!writer.ok()) {
    std::fprintf(stderr, "fake_rank: %s\n", writer.status().message().c_str());
    return 101;
  }
  Lane stream;
  stream.kind = LaneKind::kGpuStream;
  stream.device = 0;
  stream.stream = 7;
  const LaneId lane = (*writer)->AddLane(stream);
  EventTables batch;
  for (int i = 0; i < events; ++i) {
    KernelEvent kernel;
    kernel.lane = lane;
    kernel.name = (*writer)->Intern("gemm");
    kernel.start_ns = 1000 * i;
    kernel.end_ns = 1000 * i + 500;
    batch.kernels.push_back(kernel);
  }
  (*writer)->Submit(std::move(batch));
  if (drops > 0) {
    DropRecord drop;
    drop.source = "nvtx";
    drop.reason = "buffer overflow";
    drop.count = static_cast<uint64_t>(drops);
    (*writer)->AddDrops(drop);
  }
  if (rankscope::Status closed = (*writer)->Close(); !closed.ok()) {
    std::fprintf(stderr, "fake_rank: %s\n", closed.message().c_str());
    return 102;
  }
  return exit_code;
}
