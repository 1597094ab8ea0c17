// Checkpoints: parameters, optimizer state and the position in training, in one file that
// is replaced atomically (write a temporary file beside it, fsync, rename), so a crash
// while saving leaves the previous checkpoint intact.
//
// Layout: "RSCKPT01", u64 header length, the header (JSON: model shape, optimizer, step,
// workload), the float arrays (parameters, then each optimizer state buffer), and a u64
// FNV-1a hash of everything before it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/options.h"

namespace rankscope::trainer {

struct CheckpointContents {
  // What the checkpoint belongs to; checked on resume.
  int features = 0;
  int width = 0;
  int depth = 0;
  int classes = 0;
  std::string activation;
  std::string optimizer;
  // Workload, reported when it differs on resume.
  uint64_t seed = 0;
  int world_size = 0;
  int batch = 0;
  int accum = 0;
  // Position: steps completed and optimizer steps taken.
  int64_t steps_done = 0;
  int64_t optimizer_steps = 0;
  std::vector<float> parameters;
  std::vector<std::vector<float>> optimizer_state;
};

Status SaveCheckpoint(const std::string& path, const CheckpointContents& contents);
Result<CheckpointContents> LoadCheckpoint(const std::string& path);

// An error when the checkpoint's model or optimizer differs from the options'.
Status CheckResumable(const CheckpointContents& contents, const TrainerOptions& options);

}  // namespace rankscope::trainer
