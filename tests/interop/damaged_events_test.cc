// The importers' one bad-event policy (interop/import_internal.h): DamagedEvents counts damaged
// events by kind and reason and words one line per kind; the RunSink turns each rank's lines
// into notes and meta rows when the run finishes.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "interop/import_internal.h"
#include "tests/interop/import_test_util.h"
#include "tests/temp_dir.h"

namespace rankscope::interop::import {
namespace {

using rankscope::interop::testing::AllNotes;
using rankscope::interop::testing::HasNote;
using rankscope::interop::testing::Load;
using rankscope::testing::TempDir;

TEST(DamagedEventsTest, NothingCountedIsNoLine) {
  const DamagedEvents damaged;
  EXPECT_TRUE(damaged.Lines().empty());
}

TEST(DamagedEventsTest, OneEventOneReason) {
  DamagedEvents damaged;
  damaged.Count("kernel", "without a valid ts/dur", "traceEvents[1] (kernel 'relu'): no ts");
  const std::vector<DamagedEvents::Line> lines = damaged.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].kind, "kernel");
  EXPECT_EQ(lines[0].meta_key, "import.left_out.kernel");
  EXPECT_EQ(lines[0].text, "left out 1 kernel event without a valid ts/dur (first: traceEvents[1] (kernel 'relu'): "
                           "no ts)");
}

// One line per kind, kinds by name; a kind's reasons by count, the first event's detail kept.
TEST(DamagedEventsTest, ReasonsCountedWithinTheirKind) {
  DamagedEvents damaged;
  damaged.Count("kernel", "without a valid pid", "first kernel");
  damaged.Count("CUDA API call", "with end before start", "first call");
  damaged.Count("kernel", "without a valid ts/dur", "second kernel");
  damaged.Count("kernel", "without a valid ts/dur", "third kernel");
  damaged.Count("CUDA API call", "with end before start", "second call");
  const std::vector<DamagedEvents::Line> lines = damaged.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "left out 2 CUDA API call events with end before start (first: first call)");
  EXPECT_EQ(lines[0].meta_key, "import.left_out.cuda_api_call");
  EXPECT_EQ(lines[1].text,
            "left out 3 kernel events: 2 without a valid ts/dur, 1 without a valid pid (first: first kernel)");
}

TEST(DamagedEventsTest, EventsOfNoKindAndWithoutDetail) {
  DamagedEvents damaged;
  damaged.Count("", "not a JSON object", "");
  damaged.Count("", "not a JSON object", "");
  damaged.Count("start/end range", "that never ended (no \"e\")", "");
  const std::vector<DamagedEvents::Line> lines = damaged.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "left out 2 events not a JSON object");
  EXPECT_EQ(lines[0].meta_key, "import.left_out.event");
  EXPECT_EQ(lines[1].text, "left out 1 start/end range event that never ended (no \"e\")");
  EXPECT_EQ(lines[1].meta_key, "import.left_out.start_end_range");
}

// What the sink does with them: a rank's damaged events become notes that name the input and
// meta rows of its file; damaged events of no rank become notes only.
TEST(DamagedEventsTest, TheSinkNotesThemAndWritesThemIntoTheRankFile) {
  TempDir dir;
  ImportResult result;
  std::filesystem::create_directories(dir / "run");
  {
    RunSink sink(dir / "run", "policy-run");
    trace::RankIdentity who;
    who.rank = 0;
    who.world_size = 1;
    Result<RankFileBuilder*> builder = sink.Rank(who, "'trace.json'");
    ASSERT_TRUE(builder.ok()) << builder.status().message();
    (*builder)->damaged().Count("kernel", "without a valid ts/dur", "traceEvents[3] (kernel 'k'): no ts");
    trace::NvtxMarkEvent kept;  // a run must keep some event
    kept.lane = (*builder)->Lane(trace::Lane{.tid = 1});
    kept.start_ns = kept.end_ns = 1000;
    (*builder)->events().nvtx_marks.push_back(kept);
    DamagedEvents of_no_rank;
    of_no_rank.Count("kernel", "of a pid the \"rankscope\" object does not list", "traceEvents[9]: pid 7");
    sink.NoteDamaged("'trace.json'", of_no_rank);
    ASSERT_TRUE(sink.Finish(&result).ok());
  }
  EXPECT_TRUE(HasNote(result, "'trace.json': left out 1 kernel event without a valid ts/dur (first: "
                                       "traceEvents[3] (kernel 'k'): no ts)"))
      << AllNotes(result);
  EXPECT_TRUE(HasNote(result, "'trace.json': left out 1 kernel event of a pid the \"rankscope\" object does "
                                       "not list (first: traceEvents[9]: pid 7)"))
      << AllNotes(result);
  ASSERT_EQ(result.rank_files.size(), 1u);
  const trace::RankTrace rank = Load(result.rank_files[0]);
  ASSERT_TRUE(rank.meta.entries.contains("import.left_out.kernel"));
  EXPECT_EQ(rank.meta.entries.at("import.left_out.kernel"),
            "left out 1 kernel event without a valid ts/dur (first: traceEvents[3] (kernel 'k'): no ts)");
}

}  // namespace
}  // namespace rankscope::interop::import
