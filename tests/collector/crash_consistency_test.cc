// A rank file read at any commit, without a close, must be interpretable like a closed one:
// what the analyzer needs to read a row (category names, lane names, domain and string
// ids) is committed no later than the row. Driven through the collector's NVTX handlers,
// as an application's NVTX calls reach them.
#include <nvtx3/nvToolsExt.h>

#include <array>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "collector/nvtx_handlers.h"
#include "collector/recorder.h"
#include "tests/collector/collector_test_util.h"
#include "tests/collector/nvtx_attributes.h"
#include "trace/reader.h"

namespace rankscope::collector {
namespace {

using trace::testing::TempDir;

// NVTX's side of the injection handshake in miniature: the CORE and CORE2 slots that
// InstallNvtxHandlers fills, as the NVTX headers in an application offer them.
struct FakeNvtxModules {
  std::array<NvtxFunctionPointer, NVTX_CBID_CORE_SIZE> core{};
  std::array<NvtxFunctionPointer, NVTX_CBID_CORE2_SIZE> core2{};
  std::array<NvtxFunctionPointer*, NVTX_CBID_CORE_SIZE> core_slots{};
  std::array<NvtxFunctionPointer*, NVTX_CBID_CORE2_SIZE> core2_slots{};

  FakeNvtxModules() {
    for (size_t i = 0; i < core.size(); ++i) core_slots[i] = &core[i];
    for (size_t i = 0; i < core2.size(); ++i) core2_slots[i] = &core2[i];
  }
};

FakeNvtxModules* g_modules = nullptr;

int GetModuleFunctionTable(NvtxCallbackModule module, NvtxFunctionTable* out_table, unsigned int* out_size) {
  if (module == NVTX_CB_MODULE_CORE) {
    *out_table = g_modules->core_slots.data();
    *out_size = static_cast<unsigned>(g_modules->core_slots.size());
    return 1;
  }
  if (module == NVTX_CB_MODULE_CORE2) {
    *out_table = g_modules->core2_slots.data();
    *out_size = static_cast<unsigned>(g_modules->core2_slots.size());
    return 1;
  }
  return 0;
}

const void* GetExportTable(uint32_t id) {
  static const NvtxExportTableCallbacks callbacks{sizeof(NvtxExportTableCallbacks), &GetModuleFunctionTable};
  return id == NVTX_ETID_CALLBACKS ? &callbacks : nullptr;
}

// The collector's handlers installed for `recorder` in `modules`, for one test's length.
class InstalledHandlers {
 public:
  InstalledHandlers(Recorder& recorder, FakeNvtxModules& modules) {
    g_modules = &modules;
    SetNvtxRecorder(&recorder);
    installed_ = InstallNvtxHandlers(&GetExportTable) == 1;
  }
  ~InstalledHandlers() {
    SetNvtxRecorder(nullptr);
    g_modules = nullptr;
  }
  InstalledHandlers(const InstalledHandlers&) = delete;
  InstalledHandlers& operator=(const InstalledHandlers&) = delete;
  bool installed() const { return installed_; }

 private:
  bool installed_ = false;
};

template <typename Function>
Function Handler(NvtxFunctionPointer slot) {
  return reinterpret_cast<Function>(slot);
}

// A rank file as a reader finds it while its writer still has it open.
Result<trace::RankTrace> LoadUnclosed(const std::filesystem::path& path) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceReader> reader, trace::TraceReader::Open(path));
  return reader->LoadAll();
}


TEST(CrashConsistency, CategoryNamesAreCommittedWithTheirRangesBeforeClose) {
  TempDir dir;
  Recorder recorder(testing::MakeRecorderOptions(dir, {.run_id = "live", .rank = 0, .world_size = 1}));
  FakeNvtxModules modules;
  InstalledHandlers handlers(recorder, modules);
  ASSERT_TRUE(handlers.installed());

  const auto name_category = Handler<void (*)(uint32_t, const char*)>(modules.core[NVTX_CBID_CORE_NameCategoryA]);
  const auto create_domain = Handler<nvtxDomainHandle_t (*)(const char*)>(modules.core2[NVTX_CBID_CORE2_DomainCreateA]);
  const auto name_domain_category =
      Handler<void (*)(nvtxDomainHandle_t, uint32_t, const char*)>(modules.core2[NVTX_CBID_CORE2_DomainNameCategoryA]);
  const auto push = Handler<int (*)(nvtxDomainHandle_t, const nvtxEventAttributes_t*)>(
      modules.core2[NVTX_CBID_CORE2_DomainRangePushEx]);
  const auto pop = Handler<int (*)(nvtxDomainHandle_t)>(modules.core2[NVTX_CBID_CORE2_DomainRangePop]);
  ASSERT_NE(name_category, nullptr);
  ASSERT_NE(create_domain, nullptr);

  // The reference trainer's pattern: its categories named once, then ranges in them.
  name_category(1, "compute");
  const nvtxDomainHandle_t trainer = create_domain("rankscope");
  name_domain_category(trainer, 2, "comm");
  const nvtxEventAttributes_t forward = rankscope::testing::NvtxAttributes("forward", 1);
  const nvtxEventAttributes_t allreduce = rankscope::testing::NvtxAttributes("allreduce", 2);
  EXPECT_EQ(push(nullptr, &forward), 0);
  EXPECT_EQ(pop(nullptr), 0);
  EXPECT_EQ(push(trainer, &allreduce), 0);
  EXPECT_EQ(pop(trainer), 0);
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());

  // Read as a rank killed now would leave it: committed, never closed.
  auto live = LoadUnclosed(dir / "rank-0.sqlite");
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_FALSE(live->meta.closed_cleanly);
  EXPECT_EQ(live->meta.entries["nvtx.category..1"], "compute");
  EXPECT_EQ(live->meta.entries["nvtx.category.rankscope.2"], "comm");
  std::map<std::string, uint32_t> category_of;
  for (const auto& range : live->events.nvtx_ranges) category_of[live->str(range.name)] = range.category;
  EXPECT_EQ(category_of, (std::map<std::string, uint32_t>{{"allreduce", 2}, {"forward", 1}}));
  for (const auto& range : live->events.nvtx_ranges) {
    ASSERT_NE(live->lane(range.lane), nullptr) << "the lane is committed with its rows";
    EXPECT_FALSE(live->lane(range.lane)->name.empty());
  }
  EXPECT_EQ(live->str(live->events.nvtx_ranges.back().domain), "rankscope");

  // A category named later, mid-run, reaches the file at the next drain too.
  name_domain_category(trainer, 3, "memory");
  ASSERT_TRUE(recorder.Flush(std::chrono::seconds(10)).ok());
  auto later = LoadUnclosed(dir / "rank-0.sqlite");
  ASSERT_TRUE(later.ok()) << later.status().message();
  EXPECT_EQ(later->meta.entries["nvtx.category.rankscope.3"], "memory");

  ASSERT_TRUE(recorder.Close(Recorder::EndReason::kExit).ok());
  trace::RankTrace closed = testing::Load(dir / "rank-0.sqlite");
  EXPECT_TRUE(closed.meta.closed_cleanly);
  EXPECT_EQ(closed.meta.entries["nvtx.category..1"], "compute");
  EXPECT_EQ(closed.meta.entries["nvtx.category.rankscope.3"], "memory");
}

}  // namespace
}  // namespace rankscope::collector
