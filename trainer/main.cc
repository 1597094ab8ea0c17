// rankscope-trainer: parse the command line, find this rank, train, print one final line.
// Exit codes: 0 done, 1 training failed (a peer died, a collective timed out, ...), 2 bad
// arguments or environment.
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/launch_env.h"
#include "trainer/options.h"
#include "trainer/rendezvous.h"
#include "trainer/training_loop.h"

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

void PrintError(const std::string& message) {
  fmt::print(stderr, "rankscope-trainer: error: {}\n", message);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rankscope;
  using namespace rankscope::trainer;
  const std::vector<std::string> args(argv + 1, argv + argc);
  Result<CommandLine> command_line = ParseCommandLine(args);
  if (!command_line.ok()) {
    PrintError(command_line.status().message());
    return kExitUsage;
  }
  if (command_line->exit_now) {
    fmt::print("{}", command_line->text);
    return 0;
  }
  Result<World> world = DetectWorld(ProcessEnv());
  if (!world.ok()) {
    PrintError(world.status().message());
    return kExitUsage;
  }
  Result<TrainingSummary> summary = RunTraining(command_line->options, *world, stdout);
  if (!summary.ok()) {
    const StatusCode code = summary.status().code();
    PrintError(summary.status().message());
    const bool bad_input = code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ||
                           code == StatusCode::kCorrupt;  // e.g. a damaged --resume file
    return bad_input ? kExitUsage : kExitFailed;
  }
  fmt::print("rankscope-trainer: {}\n", FinalLine(*summary));
  return 0;
}
