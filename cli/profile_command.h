// The decisions `rankscope profile` makes before it starts anything: what --trace and -n
// mean, where the run directory goes, where the collector library is, whether the command
// can be run, and the environment each process gets. Errors come back as values (one line,
// no "rankscope: error:" prefix); nothing here prints or exits.
#pragma once

#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "trace/trace_selection.h"

namespace rankscope::cli {

// ---- --trace ---------------------------------------------------------------------------

// What --trace selects: the shared vocabulary in trace/, which the collector reads too.
using trace::kDefaultTraceList;
using trace::kValidTraceItems;
using trace::ParseTraceList;
using trace::TraceSelection;

// ---- -n --------------------------------------------------------------------------------

// More local ranks than this is a typo, not a machine.
inline constexpr int kMaxLocalRanks = 1024;

// Parses the N of `-n N`: a whole number from 1 to kMaxLocalRanks, digits only.
Result<int> ParseLocalRankCount(std::string_view text);

// ---- run directories -------------------------------------------------------------------

// "rankscope-run-20250102-030405" for that local time.
std::string DefaultRunDirName(const std::tm& local_time);

// Creates `parent`/rankscope-run-<YYYYmmdd-HHMMSS> for `now` (local time), or the first of
// "-2", "-3", ... appended that does not exist yet. mkdir decides, so two runs started in
// the same second get different directories. Returns the new directory's absolute path.
Result<std::filesystem::path> CreateDefaultRunDir(const std::filesystem::path& parent, std::time_t now);

struct PreparedRunDir {
  std::filesystem::path path{};                        // absolute, symlinks resolved
  bool created = false;                                // false: it existed (--force)
  std::vector<std::filesystem::path> removed_files{};  // rank files and companions --force deleted
};

// Makes `dir` ready to receive a run's rank files. A missing directory is created (with its
// missing parents). An existing one is refused unless `force`; with `force` its rank files
// and their companions are deleted (trace::RemoveRankFiles) and every other entry is kept,
// unless a run still records into it (trace::RunIsRecording): that is refused. Every check
// runs before anything is deleted, so an error leaves the directory as it was.
Result<PreparedRunDir> PrepareRunDir(const std::filesystem::path& dir, bool force);

// ---- the collector library -------------------------------------------------------------

inline constexpr std::string_view kCollectorLibraryName = "librankscope_collector.so";
// The PyTorch hook's directory, next to the collector library (the build copies it there).
inline constexpr std::string_view kPytorchHookDirName = "rankscope-pytorch";

struct CollectorCandidates {
  std::optional<std::string> from_env{};  // RANKSCOPE_COLLECTOR_LIB, when set and not empty
  std::filesystem::path build_tree{};     // where this build tree puts it; empty: unknown
  std::filesystem::path executable{};     // this program (/proc/self/exe); empty: unknown
};

// The collector library to inject, as an absolute path: RANKSCOPE_COLLECTOR_LIB when set
// (which must then exist: a wrong setting is an error, not a reason to look elsewhere),
// else the build tree's, else <executable dir>/../lib/librankscope_collector.so (installs).
// Fails naming the places it looked, or when the path cannot go into LD_PRELOAD.
Result<std::filesystem::path> FindCollectorLibrary(const CollectorCandidates& candidates);

// The PyTorch hook that `--pytorch` injects: <collector library's dir>/rankscope-pytorch,
// which must hold sitecustomize.py. Fails naming where it looked.
Result<std::filesystem::path> PytorchHookDirectory(const std::filesystem::path& collector_library);

// ---- the command -----------------------------------------------------------------------

// Finds the program execvp would run for `command`: a name with a '/' is used as it is,
// other names are looked up in `path_variable` (PATH; execvp's "/bin:/usr/bin" when unset;
// an empty entry means the current directory). NotFound when nothing matches,
// InvalidArgument when a match exists but cannot be executed (e.g. permission denied):
// shells tell these apart with exit codes 127 and 126.
Result<std::filesystem::path> ResolveCommand(std::string_view command,
                                             std::optional<std::string_view> path_variable);

// ---- environments ----------------------------------------------------------------------

// "NAME=value" entries, in the order of `environ`.
using Environment = std::vector<std::string>;

Environment CurrentEnvironment();
std::optional<std::string> GetVariable(const Environment& env, std::string_view name);
// Replaces the first NAME= entry (dropping later duplicates) or appends one.
void SetVariable(Environment& env, std::string_view name, std::string_view value);

// The contract with the collector library (collector/README.md).
struct InjectionSettings {
  std::filesystem::path run_dir{};  // absolute
  std::string run_id{};
  TraceSelection trace{};
  std::filesystem::path collector_library{};  // absolute
  // --pytorch: the PyTorch hook's directory (PytorchHookDirectory), put first on PYTHONPATH;
  // empty: no hook.
  std::filesystem::path pytorch_hook{};
  // --hang-timeout: RANKSCOPE_PROGRESS_FILE=1, so every rank keeps a progress file.
  bool progress_file = false;
};

// `base` plus RANKSCOPE_RUN_DIR, RANKSCOPE_RUN_ID, RANKSCOPE_TRACE, NVTX_INJECTION64_PATH
// and LD_PRELOAD with the collector first, ahead of whatever LD_PRELOAD held; with `cuda`
// selected CUDA_INJECTION64_PATH, with `nccl` NCCL_PROFILER_PLUGIN, both naming the collector;
// with a PyTorch hook, RANKSCOPE_PYTORCH=1 and the hook's directory first on PYTHONPATH.
Environment InjectionEnvironment(Environment base, const InjectionSettings& settings);

// One line for each variable of `env` that named another tool and that the run replaces
// (CUDA_INJECTION64_PATH, NCCL_PROFILER_PLUGIN). No "rankscope: " prefix.
std::vector<std::string> InjectionReplacementNotes(const Environment& env, const InjectionSettings& settings);

inline constexpr std::string_view kLocalMasterAddr = "127.0.0.1";

// One local rank of `-n`, with what `torchrun --standalone` would give it.
struct LocalRank {
  int rank = 0;
  int world_size = 1;
  int master_port = 0;
};

// `base` plus RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK=0,
// MASTER_ADDR=127.0.0.1 and MASTER_PORT.
Environment LocalRankEnvironment(Environment base, const LocalRank& rank);

// A TCP port that was free on 127.0.0.1 a moment ago (bound to port 0, then released).
Result<int> FindFreeLocalPort();

}  // namespace rankscope::cli
