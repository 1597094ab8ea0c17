// Golden reports of a run that did not finish: the diagnosis (analyzer/hang.h) alone as text
// and JSON (what `profile --hang-timeout` prints), and inside a report as text, Markdown and
// JSON, compared byte for byte with tests/report/golden/ (RANKSCOPE_UPDATE_GOLDEN=1 rewrites
// them, tests/golden.h). The figures computed by hand below are checked exactly in both modes.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analyzer/hang.h"
#include "report/report_writers.h"
#include "tests/golden.h"
#include "tests/run_end_builder.h"

namespace rankscope::report {
namespace {

using analyzer::HangReport;
using analyzer::RankEnd;
using analyzer::Report;
using rankscope::testing::ExpectMatchesGolden;
using rankscope::testing::GoldenPath;
using rankscope::testing::kHangComm;
using rankscope::testing::RankEndBuilder;
using trace::CollectiveOp;

std::string Golden(const std::string& name) { return "tests/report/golden/" + name; }

// ---- A hung run with a bit of everything --------------------------------------------------
//
// The hang of tests/run_end_builder.h: on the world communicator 3f2a11c09e4b7d21 ranks 0, 1
// and 3 entered AllReduce #5 (8 MiB) at 5.0, 5.1 and 5.2 s and rank 2 never did (its last
// was #4); states taken at 17.4 s, so they waited 12.4, 12.3 and 12.2 s (the longest 12.4 s,
// the table's rows "0: 12.4 s", "1: 12.3 s", "3: 12.2 s"). Rank 2 is inside step (4.5 s) ›
// backward (4.9 s) on main, open 17.4 - 4.9 = 12.5 s, and fetch (17.0 s) on pin_memory,
// open 400 ms. Besides:
// - communicator a1 (ranks 0, 1) completed #0..#9: nothing stalled, counted, not shown;
// - communicator b2 (rank 1 = comm rank 0, rank 3 = comm rank 1): rank 1 sent #0..#3 to
//   rank 3, #3 entered at 16.0 s and in flight (waited 17.4 - 16.0 = 1.40 s); rank 3
//   received #0..#2 only: it never entered the matching receive (its last was #2);
// - communicator c3 (all four) completed #0..#2 of 1 MiB, but rank 3 entered #2 as an
//   AllGather: a mismatch in op.
// Culprits: rank 2 (missing), rank 3 (unmatched p2p, mismatch). Every file ended by SIGTERM.
constexpr uint64_t kPair = 0xA1, kPipe = 0xB2, kAll = 0xC3;

std::vector<RankEnd> EverythingRun() {
  std::vector<RankEnd> ranks = rankscope::testing::HangRun();
  for (RankEnd& end : ranks) {
    const int rank = end.rank;
    RankEndBuilder more(rank, 17.4);
    if (rank < 2) more.Completed(kPair, rank, 2, 0, 9, 1 << 20);
    more.Completed(kAll, rank, 4, 0, 1, 1 << 20);
    if (rank == 3) {
      more.Completed(kAll, rank, 4, 2, 2, 1 << 20, CollectiveOp::kAllGather, "AllGather");
    } else {
      more.Completed(kAll, rank, 4, 2, 2, 1 << 20);
    }
    for (uint64_t sequence = 0; sequence < 4; ++sequence) {
      const double start = sequence < 3 ? 10.0 + static_cast<double>(sequence) : 16.0;
      if (rank == 1) more.PointToPoint(CollectiveOp::kSend, kPipe, 0, 2, 1, sequence, start, sequence == 3);
      if (rank == 3 && sequence < 3) more.PointToPoint(CollectiveOp::kRecv, kPipe, 1, 2, 0, sequence, start, false);
    }
    const RankEnd extra = more.Build();
    end.state.collectives.insert(end.state.collectives.end(), extra.state.collectives.begin(),
                                 extra.state.collectives.end());
    end.state.completed_collectives += extra.state.completed_collectives;
  }
  return ranks;
}

const HangReport& EverythingReport() {
  static const HangReport report = analyzer::DiagnoseRunEnd(EverythingRun(), 4);
  return report;
}

// A report of the run that hung: nothing else measured, the diagnosis attached.
Report HungReport() {
  Report report;
  report.tool_version = "golden";
  report.run.directory = "/runs/hung";
  report.run.world_size = 4;
  report.did_not_finish = EverythingReport();
  return report;
}

TEST(RunEndGolden, HasTheHandComputedFigures) {
  const HangReport& r = EverythingReport();
  EXPECT_EQ(r.verdict, analyzer::RunEndVerdict::kHang);
  ASSERT_EQ(r.culprits.size(), 2u);
  EXPECT_EQ(r.culprits[0].rank, 2);
  EXPECT_EQ(r.culprits[1].rank, 3);
  EXPECT_EQ(r.culprits[1].reasons, (std::vector<std::string>{"unmatched p2p", "mismatch"}));
  EXPECT_EQ(r.summary,
            "Rank 2 never entered AllReduce #5 on communicator 3f2a11c09e4b7d21 (its last entered was #4); "
            "ranks 0, 1, 3 have waited in it for 12.4 s. "
            "Rank 1 has waited 1.40 s in Send #3 to rank 3 on communicator 00000000000000b2; rank 3 never entered "
            "the matching receive (its last receive from rank 1 was #2). "
            "Mismatch in op at #2 on communicator 00000000000000c3: ranks 0-2 entered AllReduce of 1.00 MiB; "
            "rank 3 entered AllGather of 1.00 MiB. "
            "Rank 2 was inside step \u203a backward on thread main (open 12.5 s) and fetch on thread pin_memory "
            "(open 400 ms). Rank 3 was inside step \u203a backward on thread main (open 12.6 s). "
            "Ranks 0-3 ended by signal 15.");
}

TEST(RunEndGolden, Text) {
  const std::string text = HangReportToText(EverythingReport());
  ExpectMatchesGolden(GoldenPath(Golden("run_end.txt")), text);
  // The report's section is the same text, after the run summary.
  const std::string report = ReportToText(HungReport());
  EXPECT_NE(report.find("\n\n" + text), std::string::npos) << report;
}

TEST(RunEndGolden, Json) {
  const std::string json = HangReportToJson(EverythingReport());
  ExpectMatchesGolden(GoldenPath(Golden("run_end.json")), json);
  // The report's key holds the same object; a report without a diagnosis has no such key.
  const nlohmann::json report = nlohmann::json::parse(ReportToJson(HungReport()));
  EXPECT_EQ(report["did_not_finish"], nlohmann::json::parse(json));
  EXPECT_FALSE(nlohmann::json::parse(ReportToJson(Report{})).contains("did_not_finish"));
}

TEST(RunEndGolden, Markdown) {
  ExpectMatchesGolden(GoldenPath(Golden("run_end.md")), ReportToMarkdown(HungReport()));
}

TEST(RunEndGolden, HtmlShowsTheSection) {
  const std::string html = ReportToHtml(HungReport());
  EXPECT_NE(html.find("<h2>Did not finish: hang</h2>\n<p>Rank 2 never entered AllReduce #5"), std::string::npos);
  EXPECT_EQ(ReportToHtml(Report{}).find("Did not finish"), std::string::npos);
}

}  // namespace
}  // namespace rankscope::report
