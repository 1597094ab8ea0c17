// `rankscope profile [-o DIR] [--trace LIST] [--force] [-n N] -- CMD ARGS...`: the options,
// handed to RunProfile (cli/profile.h).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "cli/messages.h"
#include "cli/profile.h"
#include "cli/subcommand.h"

#ifndef RANKSCOPE_BUILD_TREE_COLLECTOR
#define RANKSCOPE_BUILD_TREE_COLLECTOR ""
#endif

namespace rankscope::cli {

ProfileContext ProcessProfileContext() {
  ProfileContext context;
  if (const char* library = std::getenv("RANKSCOPE_COLLECTOR_LIB"); library != nullptr && *library != '\0') {
    context.collector.from_env = library;
  }
  context.collector.build_tree = RANKSCOPE_BUILD_TREE_COLLECTOR;
  std::error_code ec;
  context.collector.executable = std::filesystem::read_symlink("/proc/self/exe", ec);
  context.environment = CurrentEnvironment();
  context.working_directory = std::filesystem::current_path(ec);
  if (ec) context.working_directory = ".";
  return context;
}

namespace {

// CLI11 does not know the "-- CMD ARGS..." that main.cc splits off; the usage line should.
class ProfileHelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string name) const override {
    return fmt::format("Usage: {} [OPTIONS] -- CMD ARGS...\n", name);
  }
};

// The options as CLI11 fills them; which ones were given comes from the Option counts.
struct ProfileOptions {
  ProfileRequest request;
  std::string output_dir;
  std::string local_ranks;
  CLI::Option* output_option = nullptr;
  CLI::Option* ranks_option = nullptr;
  std::string hang_timeout;
  CLI::Option* hang_option = nullptr;
};

}  // namespace

Subcommand AddProfileSubcommand(CLI::App& parent) {
  auto options = std::make_shared<ProfileOptions>();
  CLI::App* app = parent.add_subcommand(
      "profile", "Run a command (or N local ranks of it) with the collector injected; one trace file per rank");
  app->allow_extras();  // reported by DescribeExtras, in rankscope's words
  options->output_option = app->add_option("-o,--output", options->output_dir,
                                           "Run directory to create (default: ./rankscope-run-<YYYYmmdd-HHMMSS>)")
                               ->type_name("DIR");
  app->add_option("--trace", options->request.trace_list, "What to record: a comma list of nvtx, cuda, nccl")
      ->type_name("LIST")
      ->capture_default_str();
  app->add_flag("--force", options->request.force,
                "Reuse an existing run directory: delete its rank-*.sqlite files, keep everything else");
  app->add_flag("--pytorch", options->request.pytorch,
                "Also record what PyTorch does in every Python rank: steps (optimizer steps), torch.distributed "
                "collectives (DDP's included), forward/backward/optimizer compute, batch size");
  options->hang_option =
      app->add_option("--hang-timeout", options->hang_timeout,
                      "Stop the job when no rank completed a step or collective for SECONDS, print which rank "
                      "and collective it hangs in, and exit 124")
          ->type_name("SECONDS");
  options->ranks_option =
      app->add_option("-n,--ranks", options->local_ranks,
                      "Launch N local ranks with torchrun-style RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT")
          ->type_name("N");
  app->formatter(std::make_shared<ProfileHelpFormatter>());
  app->footer(
      "The command runs with RANKSCOPE_RUN_DIR, RANKSCOPE_RUN_ID, RANKSCOPE_TRACE, NVTX_INJECTION64_PATH\n"
      "and LD_PRELOAD set, plus CUDA_INJECTION64_PATH with cuda and NCCL_PROFILER_PLUGIN with nccl, all\n"
      "naming the collector. rankscope exits with its exit code (128 + N when signal N ended it), or 124\n"
      "when --hang-timeout stopped a job that made no progress.");

  return MakeSubcommand(app, true, [options](const CommandTail& tail) {
    ProfileRequest request = options->request;
    if (options->output_option->count() > 0) request.output_dir = options->output_dir;
    if (options->ranks_option->count() > 0) request.local_ranks = options->local_ranks;
    if (options->hang_option->count() > 0) request.hang_timeout = options->hang_timeout;
    request.command = tail.args;
    return RunProfile(request, ProcessProfileContext());
  });
}

}  // namespace rankscope::cli
