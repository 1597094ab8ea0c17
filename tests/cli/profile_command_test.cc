// The decisions of `rankscope profile`, tested as functions: --trace, -n, run directories,
// the collector lookup, command lookup and the environments.
#include "cli/profile_command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <optional>

#include "cli_test_util.h"
#include "trace/recording_lock.h"

namespace rankscope::cli {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::Snapshot;
using testing::TempDir;
using testing::WriteFile;

// ---- --trace ---------------------------------------------------------------------------

TEST(TraceList, DefaultSelectsEverything) {
  auto trace = ParseTraceList(kDefaultTraceList);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE(trace->nvtx && trace->cuda && trace->nccl);
  EXPECT_EQ(trace->ToList(), "nvtx,cuda,nccl");
}

TEST(TraceList, CanonicalOrderBlanksAndRepeats) {
  auto trace = ParseTraceList(" nccl ,nvtx,nccl");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE(trace->nvtx);
  EXPECT_FALSE(trace->cuda);
  EXPECT_TRUE(trace->nccl);
  EXPECT_EQ(trace->ToList(), "nvtx,nccl");
  EXPECT_EQ(ParseTraceList("cuda")->ToList(), "cuda");
}

TEST(TraceList, UnknownItemIsNamedWithTheValidOnes) {
  auto trace = ParseTraceList("nvtx,cupti");
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(trace.status().message().find("'cupti'"), std::string::npos) << trace.status().message();
  EXPECT_NE(trace.status().message().find("nvtx, cuda, nccl"), std::string::npos);
  EXPECT_FALSE(ParseTraceList("NVTX").ok()) << "names are lower case, as RANKSCOPE_TRACE carries them";
}

TEST(TraceList, EmptyListsAndItemsAreRefused) {
  for (const char* list : {"", "  ", "nvtx,", ",nvtx", "nvtx,,nccl"}) {
    SCOPED_TRACE(list);
    EXPECT_FALSE(ParseTraceList(list).ok());
  }
}

TEST(Environment, ReplacingAnotherToolsInjectionIsNoted) {
  const InjectionSettings all{.run_dir = "/r", .run_id = "id", .trace = *ParseTraceList("nvtx,cuda,nccl"),
                              .collector_library = "/c.so"};
  const Environment others = {"CUDA_INJECTION64_PATH=/opt/nsys/libToolsInjection64.so", "NCCL_PROFILER_PLUGIN=inspector"};
  const std::vector<std::string> notes = InjectionReplacementNotes(others, all);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0],
            "CUDA_INJECTION64_PATH was '/opt/nsys/libToolsInjection64.so' (another tool's CUDA injection); this run "
            "uses the collector instead");
  EXPECT_EQ(notes[1], "NCCL_PROFILER_PLUGIN was 'inspector' (another NCCL profiler plugin); this run uses the collector instead");
  // Nothing to say: unset, "none", the collector itself, or an item not selected.
  EXPECT_TRUE(InjectionReplacementNotes({"CUDA_INJECTION64_PATH=none", "NCCL_PROFILER_PLUGIN=/c.so"}, all).empty());
  EXPECT_TRUE(InjectionReplacementNotes({}, all).empty());
  const InjectionSettings nvtx_only{.run_dir = "/r", .run_id = "id", .trace = *ParseTraceList("nvtx"),
                                    .collector_library = "/c.so"};
  EXPECT_TRUE(InjectionReplacementNotes(others, nvtx_only).empty());
}

// ---- -n --------------------------------------------------------------------------------

TEST(LocalRankCount, AcceptsOneToTheCap) {
  EXPECT_EQ(*ParseLocalRankCount("1"), 1);
  EXPECT_EQ(*ParseLocalRankCount("8"), 8);
  EXPECT_EQ(*ParseLocalRankCount("1024"), kMaxLocalRanks);
}

TEST(LocalRankCount, RefusesEverythingElse) {
  for (const char* text :
       {"0", "-1", "+2", "1025", "4294967297", "99999999999999999999999", "2.0", "2 ", "", "x"}) {
    SCOPED_TRACE(text);
    auto count = ParseLocalRankCount(text);
    ASSERT_FALSE(count.ok());
    EXPECT_NE(count.status().message().find("-n"), std::string::npos);
  }
  EXPECT_NE(ParseLocalRankCount("5000").status().message().find("at most 1024"), std::string::npos);
}

// ---- run directories -------------------------------------------------------------------

TEST(RunDir, DefaultNameIsTheLocalTime) {
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 2;
  t.tm_hour = 3;
  t.tm_min = 4;
  t.tm_sec = 5;
  EXPECT_EQ(DefaultRunDirName(t), "rankscope-run-20250102-030405");
}

TEST(RunDir, DefaultDirGetsASuffixWhenTaken) {
  TempDir tmp;
  const std::time_t now = 1'700'000'000;
  std::tm local{};
  localtime_r(&now, &local);
  const std::string base = DefaultRunDirName(local);
  fs::create_directory(tmp / base);
  WriteFile(tmp / (base + "-2"), "a file takes the name too");

  auto dir = CreateDefaultRunDir(tmp.path(), now);
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  EXPECT_EQ(*dir, fs::canonical(tmp / (base + "-3")));
  EXPECT_TRUE(fs::is_directory(*dir));
  auto next = CreateDefaultRunDir(tmp.path(), now);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->filename(), base + "-4");
}

TEST(RunDir, CreatesMissingDirectoriesAsAbsolutePaths) {
  TempDir tmp;
  auto prepared = PrepareRunDir(tmp / "a/b/run", /*force=*/false);
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  EXPECT_TRUE(prepared->created);
  EXPECT_TRUE(prepared->path.is_absolute());
  EXPECT_EQ(prepared->path, fs::canonical(tmp / "a/b/run"));
  EXPECT_TRUE(prepared->removed_files.empty());
}

TEST(RunDir, ExistingDirectoryNeedsForceAndStaysUntouched) {
  TempDir tmp;
  fs::create_directory(tmp / "run");
  WriteFile(tmp / "run" / "rank-0.sqlite", "earlier");
  const auto before = Snapshot(tmp / "run");
  auto prepared = PrepareRunDir(tmp / "run", /*force=*/false);
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(prepared.status().message().find("--force"), std::string::npos);
  EXPECT_EQ(Snapshot(tmp / "run"), before);
}

TEST(RunDir, ForceDeletesRankFilesOnly) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  fs::create_directory(dir);
  for (const char* name : {"rank-0.sqlite", "rank-0.sqlite-wal", "rank-0.sqlite-shm", "rank-unknown-9.sqlite"}) {
    WriteFile(dir / name, "old");
  }
  WriteFile(dir / "notes.txt", "mine");
  WriteFile(dir / "rank-0.sqlite.bak", "mine too");
  fs::create_directory(dir / "plots");
  WriteFile(dir / "plots" / "rank-1.sqlite", "not in the run directory itself");

  auto prepared = PrepareRunDir(dir, /*force=*/true);
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  EXPECT_FALSE(prepared->created);
  EXPECT_EQ(prepared->removed_files.size(), 4u);
  std::map<std::string, std::string> expected = {{"notes.txt", "mine"},
                                                 {"rank-0.sqlite.bak", "mine too"},
                                                 {"plots", "<dir>"},
                                                 {"plots/rank-1.sqlite", "not in the run directory itself"}};
  EXPECT_EQ(Snapshot(dir), expected);
}

TEST(RunDir, ForceRefusesARunStillRecordingAndDeletesNothing) {
  TempDir tmp;
  const fs::path dir = tmp / "run";
  fs::create_directory(dir);
  WriteFile(dir / "rank-0.sqlite", "being written");
  auto acquired = trace::RecordingLock::Acquire(dir);  // as a live rank's collector holds it
  ASSERT_TRUE(acquired.ok()) << acquired.status().message();
  std::optional<trace::RecordingLock> recording(std::move(acquired).value());
  const auto before = Snapshot(dir);
  auto prepared = PrepareRunDir(dir, /*force=*/true);
  ASSERT_FALSE(prepared.ok());
  EXPECT_NE(prepared.status().message().find("still being recorded"), std::string::npos)
      << prepared.status().message();
  EXPECT_EQ(Snapshot(dir), before);

  recording.reset();  // the run ended
  auto after_the_run = PrepareRunDir(dir, /*force=*/true);
  ASSERT_TRUE(after_the_run.ok()) << after_the_run.status().message();
  EXPECT_FALSE(fs::exists(dir / "rank-0.sqlite"));
  EXPECT_TRUE(fs::exists(trace::RecordingLockPath(dir))) << "--force keeps what is not a rank file";
}

TEST(RunDir, ForceOnASymlinkedDirectoryKeepsTheLink) {
  TempDir tmp;
  fs::create_directory(tmp / "real");
  WriteFile(tmp / "real" / "rank-1.sqlite", "old");
  fs::create_directory_symlink(tmp / "real", tmp / "link");
  auto prepared = PrepareRunDir(tmp / "link", /*force=*/true);
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  EXPECT_EQ(prepared->path, fs::canonical(tmp / "real"));
  EXPECT_TRUE(fs::is_symlink(tmp / "link"));
  EXPECT_FALSE(fs::exists(tmp / "real" / "rank-1.sqlite"));
}

TEST(RunDir, ForceRefusesAFileAndARankNamedDirectory) {
  TempDir tmp;
  WriteFile(tmp / "file", "data");
  auto on_file = PrepareRunDir(tmp / "file", /*force=*/true);
  ASSERT_FALSE(on_file.ok());
  EXPECT_NE(on_file.status().message().find("not a directory"), std::string::npos);
  EXPECT_EQ(ReadFile(tmp / "file"), "data");

  // A directory that looks like a rank file: refused before any file is deleted.
  fs::create_directory(tmp / "run");
  WriteFile(tmp / "run" / "rank-0.sqlite", "old");
  fs::create_directory(tmp / "run" / "rank-1.sqlite");
  const auto before = Snapshot(tmp / "run");
  auto on_odd_dir = PrepareRunDir(tmp / "run", /*force=*/true);
  ASSERT_FALSE(on_odd_dir.ok());
  EXPECT_NE(on_odd_dir.status().message().find("rank-1.sqlite"), std::string::npos);
  EXPECT_EQ(Snapshot(tmp / "run"), before);
}

TEST(RunDir, ParentThatIsAFileIsAnError) {
  TempDir tmp;
  WriteFile(tmp / "file", "data");
  auto prepared = PrepareRunDir(tmp / "file" / "run", /*force=*/false);
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(prepared.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(ReadFile(tmp / "file"), "data");
}

// ---- the collector library -------------------------------------------------------------

TEST(CollectorLibrary, EnvironmentWinsAndMustExist) {
  TempDir tmp;
  WriteFile(tmp / "lib.so", "");
  WriteFile(tmp / "build.so", "");
  auto found = FindCollectorLibrary({.from_env = (tmp / "lib.so").string(), .build_tree = tmp / "build.so"});
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(*found, tmp / "lib.so");

  auto missing = FindCollectorLibrary({.from_env = (tmp / "nope.so").string(), .build_tree = tmp / "build.so"});
  ASSERT_FALSE(missing.ok()) << "a wrong RANKSCOPE_COLLECTOR_LIB is not silently replaced";
  EXPECT_NE(missing.status().message().find("RANKSCOPE_COLLECTOR_LIB"), std::string::npos);
}

TEST(CollectorLibrary, BuildTreeThenInstallLayout) {
  TempDir tmp;
  fs::create_directories(tmp / "prefix/bin");
  fs::create_directories(tmp / "prefix/lib");
  WriteFile(tmp / "prefix/lib/librankscope_collector.so", "");
  WriteFile(tmp / "build.so", "");
  const fs::path exe = tmp / "prefix/bin/rankscope";

  EXPECT_EQ(*FindCollectorLibrary({.build_tree = tmp / "build.so", .executable = exe}), tmp / "build.so");
  EXPECT_EQ(*FindCollectorLibrary({.build_tree = tmp / "gone.so", .executable = exe}),
            tmp / "prefix/lib/librankscope_collector.so");

  fs::remove(tmp / "prefix/lib/librankscope_collector.so");
  auto none = FindCollectorLibrary({.build_tree = tmp / "gone.so", .executable = exe});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("gone.so"), std::string::npos) << none.status().message();
  EXPECT_NE(none.status().message().find("prefix/lib/librankscope_collector.so"), std::string::npos);
}

TEST(CollectorLibrary, RelativePathsBecomeAbsolute) {
  TempDir tmp;
  WriteFile(tmp / "lib.so", "");
  const fs::path saved = fs::current_path();
  fs::current_path(tmp.path());
  auto found = FindCollectorLibrary({.from_env = "./lib.so"});
  fs::current_path(saved);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_TRUE(found->is_absolute());
  EXPECT_EQ(fs::canonical(*found), fs::canonical(tmp / "lib.so"));
}

TEST(CollectorLibrary, PathsLdPreloadWouldSplitAreRefused) {
  TempDir tmp;
  fs::create_directory(tmp / "a:b");
  WriteFile(tmp / "a:b" / "lib.so", "");
  auto found = FindCollectorLibrary({.from_env = (tmp / "a:b" / "lib.so").string()});
  ASSERT_FALSE(found.ok());
  EXPECT_NE(found.status().message().find("LD_PRELOAD"), std::string::npos);
}

// ---- the command -----------------------------------------------------------------------

TEST(Command, FoundInPathLikeExecvp) {
  TempDir tmp;
  fs::create_directory(tmp / "bin");
  WriteFile(tmp / "bin" / "tool", "#!/bin/sh\n");
  fs::permissions(tmp / "bin" / "tool", fs::perms::owner_all);
  const std::string path = "/nonexistent:" + (tmp / "bin").string();
  auto found = ResolveCommand("tool", path);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(*found, tmp / "bin" / "tool");
  EXPECT_TRUE(ResolveCommand("sh", std::nullopt).ok()) << "unset PATH searches /bin:/usr/bin";
  EXPECT_TRUE(ResolveCommand("/bin/sh", "").ok());
}

TEST(Command, MissingIsNotFoundAndUnrunnableIsNot) {
  TempDir tmp;
  auto missing = ResolveCommand("rankscope-no-such-tool", "/usr/bin:/bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("not found"), std::string::npos);
  EXPECT_EQ(ResolveCommand((tmp / "nope").string(), std::nullopt).status().code(), StatusCode::kNotFound);

  WriteFile(tmp / "data", "not a program");
  fs::permissions(tmp / "data", fs::perms::owner_read | fs::perms::owner_write);
  auto unrunnable = ResolveCommand((tmp / "data").string(), std::nullopt);
  ASSERT_FALSE(unrunnable.ok());
  EXPECT_NE(unrunnable.status().code(), StatusCode::kNotFound);
  auto in_path = ResolveCommand("data", tmp.path().string());
  ASSERT_FALSE(in_path.ok());
  EXPECT_NE(in_path.status().code(), StatusCode::kNotFound) << "execvp says EACCES, a shell 126";
  EXPECT_NE(ResolveCommand(tmp.path().string(), std::nullopt).status().code(), StatusCode::kNotFound)
      << "a directory";
}

// ---- environments ----------------------------------------------------------------------

TEST(Environment, SetReplacesTheFirstAndDropsDuplicates) {
  Environment env = {"A=1", "PATH=/bin", "AB=2", "A=3"};
  SetVariable(env, "A", "x=y");
  EXPECT_EQ(env, (Environment{"A=x=y", "PATH=/bin", "AB=2"}));
  SetVariable(env, "NEW", "");
  EXPECT_EQ(env.back(), "NEW=");
  EXPECT_EQ(GetVariable(env, "A"), "x=y");
  EXPECT_EQ(GetVariable(env, "AB"), "2");
  EXPECT_EQ(GetVariable(env, "NEW"), "");
  EXPECT_EQ(GetVariable(env, "B"), std::nullopt);
}

TEST(Environment, InjectionSetsTheCollectorContract) {
  const InjectionSettings settings{.run_dir = "/runs/r1",
                                   .run_id = "0123abcd",
                                   .trace = *ParseTraceList("nccl,nvtx"),
                                   .collector_library = "/opt/rs/lib/librankscope_collector.so"};
  const Environment env = InjectionEnvironment({"HOME=/root", "RANKSCOPE_RUN_ID=stale"}, settings);
  EXPECT_EQ(GetVariable(env, "HOME"), "/root");
  EXPECT_EQ(GetVariable(env, "RANKSCOPE_RUN_DIR"), "/runs/r1");
  EXPECT_EQ(GetVariable(env, "RANKSCOPE_RUN_ID"), "0123abcd");
  EXPECT_EQ(GetVariable(env, "RANKSCOPE_TRACE"), "nvtx,nccl");
  EXPECT_EQ(GetVariable(env, "NVTX_INJECTION64_PATH"), "/opt/rs/lib/librankscope_collector.so");
  EXPECT_EQ(GetVariable(env, "LD_PRELOAD"), "/opt/rs/lib/librankscope_collector.so");
  // `cuda` is not selected: CUDA's injection stays as it was; `nccl` is: NCCL loads the plugin.
  EXPECT_EQ(GetVariable(env, "CUDA_INJECTION64_PATH"), std::nullopt);
  EXPECT_EQ(GetVariable(env, "NCCL_PROFILER_PLUGIN"), "/opt/rs/lib/librankscope_collector.so");
  EXPECT_EQ(GetVariable(env, "RANK"), std::nullopt);
}

TEST(Environment, CudaAndNcclNameTheCollectorWhenSelected) {
  const InjectionSettings settings{.run_dir = "/r", .run_id = "id", .trace = *ParseTraceList("cuda"),
                                   .collector_library = "/c.so"};
  const Environment env = InjectionEnvironment({"CUDA_INJECTION64_PATH=/other.so", "NCCL_PROFILER_PLUGIN=x"}, settings);
  EXPECT_EQ(GetVariable(env, "CUDA_INJECTION64_PATH"), "/c.so");
  EXPECT_EQ(GetVariable(env, "NCCL_PROFILER_PLUGIN"), "x");
}

TEST(Environment, CollectorIsPrependedToLdPreload) {
  const InjectionSettings settings{.run_dir = "/r", .run_id = "id", .trace = {}, .collector_library = "/c.so"};
  EXPECT_EQ(GetVariable(InjectionEnvironment({"LD_PRELOAD=/a.so:/b.so"}, settings), "LD_PRELOAD"),
            "/c.so:/a.so:/b.so");
  EXPECT_EQ(GetVariable(InjectionEnvironment({"LD_PRELOAD="}, settings), "LD_PRELOAD"), "/c.so");
}

TEST(Environment, LocalRanksGetTorchrunVariables) {
  const Environment env =
      LocalRankEnvironment({"RANK=99", "KEEP=1"}, LocalRank{.rank = 2, .world_size = 4, .master_port = 29555});
  EXPECT_EQ(GetVariable(env, "RANK"), "2");
  EXPECT_EQ(GetVariable(env, "WORLD_SIZE"), "4");
  EXPECT_EQ(GetVariable(env, "LOCAL_RANK"), "2");
  EXPECT_EQ(GetVariable(env, "LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(GetVariable(env, "GROUP_RANK"), "0");
  EXPECT_EQ(GetVariable(env, "MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(GetVariable(env, "MASTER_PORT"), "29555");
  EXPECT_EQ(GetVariable(env, "KEEP"), "1");
}

TEST(Environment, FreeLocalPort) {
  auto port = FindFreeLocalPort();
  ASSERT_TRUE(port.ok()) << port.status().message();
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

}  // namespace
}  // namespace rankscope::cli
