// One rank's whole run: pick the backend, join the job, build the model and the DDP
// engine, train, checkpoint, and report.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "trainer/options.h"
#include "trainer/rendezvous.h"

namespace rankscope::trainer {

struct StepRecord {
  int64_t step = 0;
  bool has_loss = true;  // false on a pipeline stage before the last: the loss is not here
  double loss = 0;
  double accuracy = 0;
  double lr = 0;
  double seconds = 0;
};

struct TrainingSummary {
  int rank = 0;
  int world_size = 1;
  int stage = 0;   // a pipeline's stage of this rank, and its stages (1: no pipeline)
  int stages = 1;
  std::string backend;
  std::string device;
  std::vector<size_t> bucket_bytes;
  size_t parameter_count = 0;
  std::vector<StepRecord> steps;  // the steps this process ran (after a resume: the rest)
  double step_time_median_s = 0;  // over steps after the first one this process ran
  double samples_per_second = 0;  // this rank's samples per step / median step time
};

// Progress lines go to `log` (stdout in the program). Errors come back as values; the
// message names this rank.
Result<TrainingSummary> RunTraining(const TrainerOptions& options, const World& world, std::FILE* log);

std::string FinalLine(const TrainingSummary& summary);

}  // namespace rankscope::trainer
