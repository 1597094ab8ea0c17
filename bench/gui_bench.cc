// The viewer's speed and memory targets (issue): on an 8-rank, 10M-event run,
//   (1) time to first frame: TimelineModel::Load + the overview + the first complete paint
//       of a 1600x900 timeline, <= 3 s;
//   (2) repaint time per frame over a zoom sweep (fit, then 2x steps around the center down
//       to ~10 us, each level painted a few times with the geometry cache dropped, so every
//       frame is a full LOD rebuild), median and max <= 16 ms;
//   (3) peak RSS growth per event (from before the load to the end), <= 48 bytes;
//   (4) the search field over every event (`AllReduce|fmha`: SearchMatches::Find), <= 500 ms,
//       and the last match reachable.
//
//   gui_bench --dir DIR [--size 1600x900] [--frames 3] [--min-span-us 10]
//       DIR holds rank files, e.g. from `analyze_bench generate DIR --ranks 8 --events 10000000`.
//   gui_bench --smoke [--dir DIR]
//       CI: a small run built in memory (or DIR), every step once, no timing verdicts.
//
// Prints a table with each target and PASS/FAIL; exits 1 when a target is missed (not in
// --smoke), 2 on bad arguments or a run that cannot be loaded.
#include <sys/resource.h>
#include <unistd.h>

#include <QApplication>
#include <QImage>
#include <QPainter>
#include <QRegularExpression>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "base/format.h"
#include "analyzer/analyze.h"
#include "bench/rss.h"
#include "gui/widgets/main_window.h"
#include "analyzer/run_events.h"
#include "gui/core/time_view.h"
#include "gui/core/timeline_model.h"
#include "gui/core/search.h"
#include "gui/widgets/overview_strip.h"
#include "gui/widgets/search_bar.h"
#include "gui/widgets/timeline_view.h"

namespace rankscope::bench {
namespace {

using Clock = std::chrono::steady_clock;
using gui::TimelineModel;

constexpr double kFirstFrameTargetS = 3.0;
constexpr double kFrameTargetMs = 16.0;
constexpr double kBytesPerEventTarget = 48.0;
// The search field over every event: a pattern of two frequent kernels (issue 25).
constexpr double kSearchTargetMs = 500.0;
constexpr const char* kSearchPattern = "AllReduce|fmha";

struct Options {
  std::string dir;
  bool smoke = false;
  int width = 1600, height = 900;
  int frames = 3;
  double min_span_us = 10;
};


double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A small run in memory for --smoke: per rank a GPU stream of back-to-back kernels with
// gaps and a thread of nested step/forward/backward ranges. Not the analyzer bench's
// generator: just enough rows, folds and nesting to run every paint path.
std::unique_ptr<TimelineModel> SmokeModel(int ranks, int kernels_per_rank) {
  std::vector<gui::RankTimeline> timelines;
  std::mt19937_64 rng(7);
  for (int r = 0; r < ranks; ++r) {
    gui::RankTimeline rank;
    rank.rank = r;
    rank.host = "smoke";
    rank.strings = {"", "gemm_kernel", "elementwise_kernel", "ncclDevKernel_AllReduce", "step", "forward", "backward"};
    std::vector<analyzer::ViewEvent> kernels, comm, ranges;
    int64_t t = 1'000'000;
    std::uniform_int_distribution<int64_t> length(2'000, 40'000), gap(500, 5'000);
    for (int k = 0; k < kernels_per_rank; ++k) {
      analyzer::ViewEvent e;
      e.start_ns = t;
      e.end_ns = t + length(rng);
      e.lane = 1;
      e.name = k % 3 == 0 ? 1 : 2;
      e.event_class = analyzer::EventClass::kCompute;
      e.source = analyzer::EventSource::kKernel;
      kernels.push_back(e);
      if (k % 50 == 49) {
        analyzer::ViewEvent c = e;
        c.lane = 2;
        c.name = 3;
        c.end_ns = e.start_ns + 4 * length(rng);
        c.event_class = analyzer::EventClass::kComm;
        comm.push_back(c);
      }
      t = e.end_ns + gap(rng);
    }
    // Steps of 200 kernels, each with a forward and a backward half.
    for (size_t k = 0; k + 200 <= kernels.size(); k += 200) {
      const int64_t s = kernels[k].start_ns, m = kernels[k + 100].start_ns, e = kernels[k + 199].end_ns;
      for (const auto& [a, b, name] : {std::tuple{s, e, 4u}, std::tuple{s, m, 5u}, std::tuple{m, e, 6u}}) {
        analyzer::ViewEvent range;
        range.start_ns = a;
        range.end_ns = b;
        range.lane = 3;
        range.name = name;
        range.event_class = analyzer::EventClass::kAnnotation;
        range.source = analyzer::EventSource::kNvtxRange;
        ranges.push_back(range);
      }
    }
    auto add_track = [&](trace::LaneId lane, trace::LaneKind kind, int device, std::string label,
                         std::vector<analyzer::ViewEvent> events) {
      gui::Track track;
      track.lane = lane;
      track.kind = kind;
      track.device = device;
      track.label = std::move(label);
      track.events = events.size();
      track.rows = gui::PackRows(std::move(events));
      rank.events += track.events;
      rank.tracks.push_back(std::move(track));
    };
    add_track(1, trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 7", std::move(kernels));
    add_track(2, trace::LaneKind::kGpuStream, 0, "GPU 0 · stream 13", std::move(comm));
    add_track(3, trace::LaneKind::kCpuThread, -1, "thread main", std::move(ranges));
    rank.first_ns = 1'000'000;
    rank.last_ns = t;
    timelines.push_back(std::move(rank));
  }
  return std::make_unique<TimelineModel>("smoke", std::move(timelines));
}

std::optional<Options> ParseArgs(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    if (arg == "--smoke") {
      options.smoke = true;
    } else if (arg == "--dir") {
      const auto v = value();
      if (!v) return std::nullopt;
      options.dir = *v;
    } else if (arg == "--size") {
      const auto v = value();
      if (!v || std::sscanf(v->c_str(), "%dx%d", &options.width, &options.height) != 2 || options.width < 200 ||
          options.height < 200) {
        return std::nullopt;
      }
    } else if (arg == "--frames") {
      const auto v = value();
      if (!v || (options.frames = std::atoi(v->c_str())) < 1) return std::nullopt;
    } else if (arg == "--min-span-us") {
      const auto v = value();
      if (!v || (options.min_span_us = std::atof(v->c_str())) <= 0) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (!options.smoke && options.dir.empty()) return std::nullopt;
  return options;
}

// One paint of the whole widget into `image`, timed.
double PaintMs(gui::TimelineView& view, QImage& image) {
  const auto started = Clock::now();
  QPainter painter(&image);
  view.render(&painter);
  painter.end();
  return Ms(Clock::now() - started);
}

struct Level {
  int64_t span_ns = 0;
  double median_ms = 0, max_ms = 0;
  double build_ms = 0;  // of the last frame: the LOD part of it
  size_t items = 0, rows = 0;
};

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int Run(const Options& options) {
  const int64_t rss_before = CurrentRssBytes();
  const auto load_started = Clock::now();
  std::unique_ptr<TimelineModel> model;
  if (!options.dir.empty()) {
    auto loaded = TimelineModel::Load(options.dir, gui::ModelLoadOptions());
    if (!loaded.ok()) {
      std::fprintf(stderr, "gui_bench: error: %s\n", loaded.status().message().c_str());
      return 2;
    }
    model = std::move(loaded).value();
  } else {
    model = SmokeModel(2, 20000);
  }
  const double load_ms = Ms(Clock::now() - load_started);
  const auto overview_started = Clock::now();
  gui::OverviewData overview = gui::ComputeOverview(*model);
  const double overview_ms = Ms(Clock::now() - overview_started);

  gui::TimelineView view;
  view.resize(options.width, options.height);
  view.setAttribute(Qt::WA_DontShowOnScreen);
  view.show();
  QApplication::processEvents();
  const auto paint_started = Clock::now();
  view.setModel(model.get());
  QImage image(options.width, options.height, QImage::Format_ARGB32_Premultiplied);
  PaintMs(view, image);
  const double first_paint_ms = Ms(Clock::now() - paint_started);
  const double first_frame_s = (load_ms + overview_ms + first_paint_ms) / 1000;

  // The sweep: fit, then halve the span around the center until it reaches the minimum.
  const int64_t run_start = model->start_ns(), run_end = model->end_ns();
  const int64_t center = run_start + (run_end - run_start) / 2;
  const auto min_span = static_cast<int64_t>(options.min_span_us * 1000);
  std::vector<Level> levels;
  std::vector<double> all_frames;
  for (int64_t span = std::max<int64_t>(run_end - run_start, 1);; span /= 2) {
    if (levels.empty()) {
      view.setTimeRange(run_start, run_end);
    } else {
      view.setTimeRange(center - span / 2, center - span / 2 + span);
    }
    Level level;
    level.span_ns = view.view().duration_ns();
    std::vector<double> frames;
    for (int f = 0; f < options.frames; ++f) {
      view.invalidateGeometry();  // every frame is a full rebuild, never a cached one
      frames.push_back(PaintMs(view, image));
    }
    level.median_ms = Median(frames);
    level.max_ms = *std::max_element(frames.begin(), frames.end());
    level.build_ms = view.frameStats().build_ms;
    level.items = view.frameStats().items;
    level.rows = view.frameStats().rows;
    all_frames.insert(all_frames.end(), frames.begin(), frames.end());
    levels.push_back(level);
    if (span / 2 < min_span) break;
  }
  const double events = static_cast<double>(std::max<size_t>(model->events(), 1));
  const double view_bytes_per_event = (PeakRssBytes() - rss_before) / events;
  // The window also runs the analysis for its Run tab while the model is held: the
  // viewer's real peak includes it.
  double analysis_s = 0;
  if (!options.dir.empty()) {
    const auto analysis_started = Clock::now();
    auto report = analyzer::AnalyzeRun(options.dir, gui::ViewerAnalyzeOptions());
    analysis_s = Ms(Clock::now() - analysis_started) / 1000;
    if (!report.ok()) {
      std::fprintf(stderr, "gui_bench: error: %s\n", report.status().message().c_str());
      return 2;
    }
  }
  const double bytes_per_event = (PeakRssBytes() - rss_before) / events;
  // The search field's work for a pattern: every event's name, each distinct name matched
  // once per rank; then a step to the last match, which must be reachable.
  const QRegularExpression search_regex(QString::fromLatin1(kSearchPattern), QRegularExpression::CaseInsensitiveOption);
  const auto search_started = Clock::now();
  const gui::SearchMatches found = gui::SearchMatches::Find(*model, gui::NameMatcher(search_regex));
  const double search_ms = Ms(Clock::now() - search_started);
  const auto last_match = found.StepFromTime(*model, model->start_ns(), /*forward=*/false);
  const bool last_reached =
      found.empty() || (last_match && found.PositionOf(*model, *last_match) + 1 == found.size());
  const double frame_median = Median(all_frames);
  const double frame_max = *std::max_element(all_frames.begin(), all_frames.end());

  fmt::print("gui_bench: {} ({} ranks, {} events), {}x{} timeline, {} frames per level\n",
             options.dir.empty() ? std::string("in-memory smoke run") : options.dir, model->ranks().size(),
             model->events(), options.width, options.height, options.frames);
  fmt::print("\n{:>12}  {:>8}  {:>8}  {:>8}  {:>8}  {:>6}\n", "span", "median", "max", "lod", "items", "rows");
  for (const Level& level : levels) {
    fmt::print("{:>12}  {:>6.2f}ms  {:>6.2f}ms  {:>6.2f}ms  {:>8}  {:>6}\n", format::FormatDuration(static_cast<double>(level.span_ns)),
               level.median_ms, level.max_ms, level.build_ms, level.items, level.rows);
  }
  fmt::print(
      "\nload {:.0f} ms, overview {:.0f} ms, first paint {:.0f} ms; model {:.1f} bytes/event in its "
      "columns, {:.1f} bytes/event peak before the analysis; the analysis took {:.1f} s\n",
      load_ms, overview_ms, first_paint_ms, model->MemoryBytes() / events, view_bytes_per_event, analysis_s);
  fmt::print("search /{}/: {} matches of {} events in {:.0f} ms ({:.1f} bytes per match), the last one {}\n",
             kSearchPattern, found.size(), model->events(), search_ms,
             found.empty() ? 0.0 : static_cast<double>(found.MemoryBytes()) / static_cast<double>(found.size()),
             last_reached ? "reached" : "NOT reached");
  auto verdict = [&](bool pass) { return options.smoke ? "(smoke)" : pass ? "PASS" : "FAIL"; };
  const bool first_ok = first_frame_s <= kFirstFrameTargetS;
  const bool median_ok = frame_median <= kFrameTargetMs;
  const bool max_ok = frame_max <= kFrameTargetMs;
  const bool memory_ok = bytes_per_event <= kBytesPerEventTarget;
  const bool search_ok = search_ms <= kSearchTargetMs && last_reached;
  fmt::print("\n{:<34} {:>12} {:>10}  {}\n", "target", "measured", "limit", "verdict");
  fmt::print("{:<34} {:>10.2f} s {:>8.1f} s  {}\n", "time to first frame", first_frame_s, kFirstFrameTargetS,
             verdict(first_ok));
  fmt::print("{:<34} {:>9.2f} ms {:>7.1f} ms  {}\n", "repaint, median over the sweep", frame_median, kFrameTargetMs,
             verdict(median_ok));
  fmt::print("{:<34} {:>9.2f} ms {:>7.1f} ms  {}\n", "repaint, max over the sweep", frame_max, kFrameTargetMs,
             verdict(max_ok));
  fmt::print("{:<34} {:>10.1f} B {:>8.1f} B  {}\n", "peak RSS per event, with analysis", bytes_per_event, kBytesPerEventTarget,
             verdict(memory_ok));
  fmt::print("{:<34} {:>9.0f} ms {:>7.0f} ms  {}\n", "search over every event", search_ms, kSearchTargetMs,
             verdict(search_ok));
  if (options.smoke) return last_reached ? 0 : 1;
  return first_ok && median_ok && max_ok && memory_ok && search_ok ? 0 : 1;
}

}  // namespace
}  // namespace rankscope::bench

int main(int argc, char** argv) {
  const auto options = rankscope::bench::ParseArgs(argc, argv);
  if (!options) {
    std::fputs(
        "usage: gui_bench --dir DIR [--size WxH] [--frames N] [--min-span-us US]\n"
        "       gui_bench --smoke [--dir DIR]\n"
        "DIR: rank files, e.g. from `analyze_bench generate DIR --ranks 8 --events 10000000`\n",
        stderr);
    return 2;
  }
  // Headless and deterministic: no display needed, 96 DPI.
  const char* platform = std::getenv("QT_QPA_PLATFORM");
  if (platform == nullptr || platform[0] == '\0') setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QCoreApplication::setAttribute(Qt::AA_Use96Dpi);
  int qt_argc = 1;
  char* qt_argv[] = {argv[0], nullptr};
  QApplication app(qt_argc, qt_argv);
  return rankscope::bench::Run(*options);
}
