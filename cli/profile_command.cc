#include "cli/profile_command.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "base/text.h"
#include "trace/recording_lock.h"
#include "trace/run_dir.h"

extern char** environ;

namespace rankscope::cli {
namespace fs = std::filesystem;

namespace {

// Paths come from users; quoted and escaped they cannot break the one-line rule.
std::string ErrnoText(int error) { return std::strerror(error); }

}  // namespace

// ---- --trace ---------------------------------------------------------------------------

std::vector<std::string> InjectionReplacementNotes(const Environment& env, const InjectionSettings& settings) {
  std::vector<std::string> notes;
  const std::string library = settings.collector_library.string();
  auto check = [&](bool selected, std::string_view name, std::string_view what) {
    const std::optional<std::string> value = GetVariable(env, name);
    if (!selected || !value || value->empty() || *value == library || *value == "none") return;
    notes.push_back(fmt::format("{} was {} ({}); this run uses the collector instead", name,
                                Printable(*value, 128), what));
  };
  check(settings.trace.cuda, "CUDA_INJECTION64_PATH", "another tool's CUDA injection");
  check(settings.trace.nccl, "NCCL_PROFILER_PLUGIN", "another NCCL profiler plugin");
  return notes;
}

// ---- -n --------------------------------------------------------------------------------

Result<int> ParseLocalRankCount(std::string_view text) {
  const auto invalid = [&] {
    return InvalidArgument(fmt::format("-n needs a whole number of local ranks from 1 to {}, not {}",
                                       kMaxLocalRanks, Printable(text)));
  };
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return invalid();
  }
  int count = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && count > kMaxLocalRanks)) {
    return InvalidArgument(fmt::format("-n {} is too many local ranks (at most {})", text, kMaxLocalRanks));
  }
  if (ec != std::errc() || end != text.data() + text.size() || count < 1) return invalid();
  return count;
}

// ---- run directories -------------------------------------------------------------------

std::string DefaultRunDirName(const std::tm& t) {
  return fmt::format("rankscope-run-{:04}{:02}{:02}-{:02}{:02}{:02}", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                     t.tm_hour, t.tm_min, t.tm_sec);
}

namespace {

// The directory's absolute path with symlinks resolved, as the collector will see it.
Result<fs::path> AbsoluteDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::path resolved = fs::canonical(dir, ec);
  if (ec) return IoError(fmt::format("cannot resolve the run directory {}: {}", Quoted(dir), ec.message()));
  return resolved;
}

Status CreateMissingParents(const fs::path& dir) {
  const fs::path parent = dir.parent_path();
  if (parent.empty()) return Status::Ok();
  std::error_code ec;
  if (fs::exists(parent, ec)) return Status::Ok();
  fs::create_directories(parent, ec);
  if (ec) {
    return IoError(
        fmt::format("cannot create the run directory {}: {}: {}", Quoted(dir), Quoted(parent), ec.message()));
  }
  return Status::Ok();
}

}  // namespace

Result<fs::path> CreateDefaultRunDir(const fs::path& parent, std::time_t now) {
  std::tm local{};
  localtime_r(&now, &local);
  const std::string base = DefaultRunDirName(local);
  constexpr int kMaxAttempts = 1000;
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    const fs::path dir = parent / (attempt == 1 ? base : fmt::format("{}-{}", base, attempt));
    if (::mkdir(dir.c_str(), 0777) == 0) return AbsoluteDirectory(dir);
    const int error = errno;
    if (error != EEXIST) {
      return IoError(fmt::format("cannot create the run directory {}: {}", Quoted(dir), ErrnoText(error)));
    }
  }
  return AlreadyExists(fmt::format("{}: {} run directories named {}-N exist already; choose one with -o",
                                   Quoted(parent), kMaxAttempts, base));
}

Result<PreparedRunDir> PrepareRunDir(const fs::path& dir, bool force) {
  PreparedRunDir prepared;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);  // follows a symlink to a directory
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return IoError(fmt::format("cannot use the run directory {}: {}", Quoted(dir), ec.message()));
  }

  if (!fs::exists(status)) {
    RS_RETURN_IF_ERROR(CreateMissingParents(dir));
    if (::mkdir(dir.c_str(), 0777) != 0) {
      const int error = errno;
      if (error == EEXIST) {
        return AlreadyExists(
            fmt::format("the run directory {} appeared while rankscope was creating it", Quoted(dir)));
      }
      return IoError(fmt::format("cannot create the run directory {}: {}", Quoted(dir), ErrnoText(error)));
    }
    prepared.created = true;
    RS_ASSIGN_OR_RETURN(prepared.path, AbsoluteDirectory(dir));
    return prepared;
  }

  if (!force) {
    return AlreadyExists(
        fmt::format("{} already exists; choose another directory with -o, or pass --force "
                    "to replace the rank files in it",
                    Quoted(dir)));
  }
  if (!fs::is_directory(status)) {
    return AlreadyExists(
        fmt::format("{} exists and is not a directory; --force only replaces rank files "
                    "inside a run directory",
                    Quoted(dir)));
  }

  // A run still recording there would lose files it is writing, and end as if nothing
  // happened: its collectors hold the directory's recording lock (trace/recording_lock.h).
  Result<bool> recording = trace::RunIsRecording(dir);
  if (!recording.ok()) return recording.status().WithContext("--force");
  if (*recording) {
    return Unavailable(
        fmt::format("{} is still being recorded into by a running process (it holds {}); --force deletes "
                    "nothing while that run records: wait for it to end, or choose another directory with -o",
                    Quoted(dir), trace::kRecordingLockFileName));
  }

  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int error = errno;
    return IoError(fmt::format("cannot replace rank files in {}: {}", Quoted(dir), ErrnoText(error)));
  }
  // trace/ checks every entry before it removes any: a refusal leaves the directory as it was.
  Result<std::vector<fs::path>> removed = trace::RemoveRankFiles(dir);
  if (!removed.ok()) return removed.status().WithContext("--force");
  prepared.removed_files = std::move(removed).value();
  RS_ASSIGN_OR_RETURN(prepared.path, AbsoluteDirectory(dir));
  return prepared;
}

// ---- the collector library -------------------------------------------------------------

namespace {

bool IsRegularFile(const fs::path& path) {
  std::error_code ec;
  return !path.empty() && fs::is_regular_file(path, ec);
}

// ld.so splits LD_PRELOAD at colons and blanks, so such a path would preload pieces of it.
Status CheckPreloadable(const fs::path& library) {
  const std::string text = library.string();
  if (text.find_first_of(": \t\n") != std::string::npos) {
    return InvalidArgument(
        fmt::format("the collector library path {} contains ':' or a blank, which "
                    "LD_PRELOAD cannot carry; move it or point RANKSCOPE_COLLECTOR_LIB "
                    "at a copy",
                    Quoted(library)));
  }
  return Status::Ok();
}

Result<fs::path> Chosen(const fs::path& library) {
  std::error_code ec;
  fs::path absolute = fs::absolute(library, ec);
  if (ec) return IoError(fmt::format("cannot resolve {}: {}", Quoted(library), ec.message()));
  absolute = absolute.lexically_normal();
  RS_RETURN_IF_ERROR(CheckPreloadable(absolute));
  return absolute;
}

}  // namespace

Result<fs::path> FindCollectorLibrary(const CollectorCandidates& candidates) {
  if (candidates.from_env) {
    const fs::path library(*candidates.from_env);
    if (!IsRegularFile(library)) {
      return NotFound(fmt::format("RANKSCOPE_COLLECTOR_LIB={} is not a file; point it at {} or unset it",
                                  Quoted(library), kCollectorLibraryName));
    }
    return Chosen(library);
  }
  std::vector<fs::path> looked_in;
  if (!candidates.build_tree.empty()) {
    if (IsRegularFile(candidates.build_tree)) return Chosen(candidates.build_tree);
    looked_in.push_back(candidates.build_tree);
  }
  if (!candidates.executable.empty()) {
    const fs::path installed =
        (candidates.executable.parent_path() / ".." / "lib" / kCollectorLibraryName).lexically_normal();
    if (IsRegularFile(installed)) return Chosen(installed);
    looked_in.push_back(installed);
  }
  std::string places;
  for (const fs::path& path : looked_in) places += (places.empty() ? "" : ", ") + Quoted(path);
  return NotFound(
      fmt::format("cannot find the collector library {} (looked in: {}); build the "
                  "rankscope_collector target or set RANKSCOPE_COLLECTOR_LIB",
                  kCollectorLibraryName, places.empty() ? "nowhere" : places));
}

// ---- the command -----------------------------------------------------------------------

namespace {

// 0 when `path` is a file this process may execute, else the errno exec would report.
int ExecutableError(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return errno;
  if (S_ISDIR(info.st_mode)) return EACCES;  // execve on a directory says EACCES
  if (::access(path.c_str(), X_OK) != 0) return errno;
  return 0;
}

Status CannotRun(std::string_view command, int error) {
  if (error == ENOENT || error == ENOTDIR) {
    return NotFound(fmt::format("cannot run {}: command not found", Printable(command, 256)));
  }
  return InvalidArgument(fmt::format("cannot run {}: {}", Printable(command, 256), ErrnoText(error)));
}

}  // namespace

Result<fs::path> ResolveCommand(std::string_view command, std::optional<std::string_view> path_variable) {
  if (command.empty()) return NotFound("cannot run '': the command is empty");
  if (command.find('/') != std::string_view::npos) {
    const fs::path path(command);
    if (const int error = ExecutableError(path); error != 0) return CannotRun(command, error);
    return path;
  }
  std::string_view search = path_variable.value_or("/bin:/usr/bin");
  int remembered = ENOENT;  // execvp reports EACCES when it only found files it may not run
  while (true) {
    const size_t colon = search.find(':');
    const std::string_view entry = search.substr(0, colon);
    const fs::path candidate = fs::path(entry.empty() ? "." : std::string(entry)) / std::string(command);
    const int error = ExecutableError(candidate);
    if (error == 0) return candidate;
    if (error == EACCES) remembered = EACCES;
    if (colon == std::string_view::npos) break;
    search.remove_prefix(colon + 1);
  }
  return CannotRun(command, remembered);
}

// ---- environments ----------------------------------------------------------------------

Environment CurrentEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) env.emplace_back(*entry);
  return env;
}

namespace {
bool HasName(std::string_view entry, std::string_view name) {
  return entry.size() > name.size() && entry[name.size()] == '=' && entry.starts_with(name);
}
}  // namespace

std::optional<std::string> GetVariable(const Environment& env, std::string_view name) {
  for (const std::string& entry : env) {
    if (HasName(entry, name)) return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

void SetVariable(Environment& env, std::string_view name, std::string_view value) {
  std::string entry = fmt::format("{}={}", name, value);
  auto first = std::find_if(env.begin(), env.end(), [&](const std::string& e) { return HasName(e, name); });
  if (first == env.end()) {
    env.push_back(std::move(entry));
    return;
  }
  *first = std::move(entry);
  // getenv would see the first entry, but other readers may see a later one: keep one.
  env.erase(std::remove_if(std::next(first), env.end(), [&](const std::string& e) { return HasName(e, name); }),
            env.end());
}

Environment InjectionEnvironment(Environment env, const InjectionSettings& settings) {
  const std::string library = settings.collector_library.string();
  const std::optional<std::string> preload = GetVariable(env, "LD_PRELOAD");
  SetVariable(env, "RANKSCOPE_RUN_DIR", settings.run_dir.string());
  SetVariable(env, "RANKSCOPE_RUN_ID", settings.run_id);
  SetVariable(env, "RANKSCOPE_TRACE", settings.trace.ToList());
  if (settings.progress_file) SetVariable(env, "RANKSCOPE_PROGRESS_FILE", "1");
  SetVariable(env, "NVTX_INJECTION64_PATH", library);
  SetVariable(env, "LD_PRELOAD", preload && !preload->empty() ? library + ":" + *preload : library);
  // The same library is CUDA's injection (CUPTI starts in cuInit) and NCCL's profiler plugin.
  if (settings.trace.cuda) SetVariable(env, "CUDA_INJECTION64_PATH", library);
  if (settings.trace.nccl) SetVariable(env, "NCCL_PROFILER_PLUGIN", library);
  if (!settings.pytorch_hook.empty()) {
    const std::string hook = settings.pytorch_hook.string();
    const std::optional<std::string> python_path = GetVariable(env, "PYTHONPATH");
    SetVariable(env, "PYTHONPATH", python_path && !python_path->empty() ? hook + ":" + *python_path : hook);
    SetVariable(env, "RANKSCOPE_PYTORCH", "1");
  }
  return env;
}

Result<fs::path> PytorchHookDirectory(const fs::path& collector_library) {
  const fs::path directory = collector_library.parent_path() / kPytorchHookDirName;
  if (!IsRegularFile(directory / "sitecustomize.py")) {
    return NotFound(fmt::format("--pytorch: the PyTorch hook is missing: no {} (it belongs next to {})",
                                Quoted(directory / "sitecustomize.py"), Quoted(collector_library)));
  }
  if (directory.string().find(':') != std::string::npos) {
    return InvalidArgument(fmt::format("--pytorch: the PyTorch hook's directory {} contains ':', which PYTHONPATH "
                                       "cannot hold", Quoted(directory)));
  }
  return directory;
}

Environment LocalRankEnvironment(Environment env, const LocalRank& rank) {
  SetVariable(env, "RANK", std::to_string(rank.rank));
  SetVariable(env, "WORLD_SIZE", std::to_string(rank.world_size));
  SetVariable(env, "LOCAL_RANK", std::to_string(rank.rank));
  SetVariable(env, "LOCAL_WORLD_SIZE", std::to_string(rank.world_size));
  SetVariable(env, "GROUP_RANK", "0");
  SetVariable(env, "MASTER_ADDR", kLocalMasterAddr);
  SetVariable(env, "MASTER_PORT", std::to_string(rank.master_port));
  return env;
}

Result<int> FindFreeLocalPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(fmt::format("cannot open a TCP socket for MASTER_PORT: {}", ErrnoText(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = 0;  // the kernel picks a free port
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  Status status;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    status = Unavailable(
        fmt::format("cannot find a free TCP port on {} for MASTER_PORT: {}", kLocalMasterAddr, ErrnoText(errno)));
  }
  ::close(fd);
  if (!status.ok()) return status;
  return static_cast<int>(ntohs(address.sin_port));
}

}  // namespace rankscope::cli
