// Other tools' traces straight into the analysis: each input is read by its importer on a
// worker thread, its ranks streamed into the analyzer's scanners (RunSink's streamed
// ranks) instead of rank files, so nothing goes through SQLite.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "interop/import_internal.h"
#include "interop/interop.h"
#include "trace/run_dir.h"

namespace rankscope::interop {
namespace fs = std::filesystem;

namespace {

using InputFiles = std::vector<std::pair<fs::path, TraceFormat>>;

// Reads every file on up to `threads` workers (0: one per hardware thread), each input into
// its own sink, inputs handed out in order (RankClaims relies on it). Returns the error of
// the lowest failed input; no input starts after a failure.
Status ReadInputs(const InputFiles& files, int threads, std::vector<std::unique_ptr<import::RunSink>>& sinks,
                  const std::function<void(int, int)>& progress) {
  const size_t count = files.size();
  std::vector<Status> statuses(count, Status::Ok());
  std::atomic<size_t> next{0};
  std::atomic<int> done{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    struct Release {
      ~Release() { import::ReleaseReadingBuffers(); }
    } release;
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= count) return;
      if (failed.load()) {
        sinks[i]->DoneClaiming();  // never read: inputs after it must not wait for it
        return;
      }
      import::RunSink& sink = *sinks[i];
      Status status = import::ImportOne(files[i].first, files[i].second, sink);
      if (status.ok()) status = sink.CloseOpenRanks();
      sink.DoneClaiming();  // also after a failure: later inputs wait for it
      if (!status.ok()) {
        statuses[i] = std::move(status);
        failed.store(true);
      }
      const int finished = done.fetch_add(1) + 1;
      if (progress) progress(finished, static_cast<int>(count));
    }
  };
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t workers = std::min<size_t>(count, threads > 0 ? static_cast<size_t>(threads) : hardware);
  std::vector<std::thread> pool;
  try {
    for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // Fewer threads than asked for: the ones there (and this one) do the work.
  }
  work();
  for (std::thread& thread : pool) thread.join();
  for (Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

// Reads other tools' traces into a visitor per rank, which `open_rank` gives (from the
// reading threads); returns the reading's notes. The ranks' trailers come last, all of them,
// on this thread.
Result<std::vector<std::string>> StreamInputs(const InputFiles& files, int threads,
                                              const import::RankStreamOpener& open_rank,
                                              trace::StreamOptions stream_options,
                                              const std::function<void(int, int)>& progress) {
  const std::string run_id = trace::GenerateRunId();
  auto claims = std::make_shared<import::RankClaims>(/*ordered=*/true);
  std::vector<std::unique_ptr<import::RunSink>> sinks;
  for (size_t i = 0; i < files.size(); ++i) {
    sinks.push_back(std::make_unique<import::RunSink>(claims, i, open_rank, run_id, stream_options));
  }
  RS_RETURN_IF_ERROR(ReadInputs(files, threads, sinks, progress));
  std::vector<import::RunSink*> in_order;
  for (auto& sink : sinks) in_order.push_back(sink.get());
  ImportResult read;
  RS_RETURN_IF_ERROR(import::RunSink::FinishAll(in_order, &read));
  return std::move(read.notes);
}

std::string Display(const std::vector<fs::path>& inputs) {
  std::string display;
  for (const fs::path& input : inputs) display += (display.empty() ? "" : ", ") + input.string();
  return display;
}

// One rank of another tool's trace, for the viewer: every row to the view, and the rows the
// metrics read (no API calls or syncs) to the analysis. The analysis failing only stops the
// analysis: the view goes on.
class ViewAndAnalysis final : public trace::SpanVisitor {
 public:
  ViewAndAnalysis(trace::SpanVisitor& view, trace::SpanVisitor& analysis) : view_(view), analysis_(analysis) {}

  Status OnHeader(trace::StreamHeader header) override {
    Analyze([&] { return analysis_.OnHeader(header); });
    return view_.OnHeader(std::move(header));
  }
  Status OnSpans(trace::SpanTable table, std::span<const trace::SpanRow> rows) override {
    if (table != trace::SpanTable::kApiCalls && table != trace::SpanTable::kSyncs) {
      Analyze([&] { return analysis_.OnSpans(table, rows); });
    }
    return view_.OnSpans(table, rows);
  }
  Status OnMoreNames(std::span<const std::string> strings, std::span<const trace::Lane> lanes) override {
    Analyze([&] { return analysis_.OnMoreNames(strings, lanes); });
    return view_.OnMoreNames(strings, lanes);
  }
  Status OnTrailer(trace::StreamTrailer trailer) override {
    Analyze([&] { return analysis_.OnTrailer(trailer); });
    return view_.OnTrailer(std::move(trailer));
  }

  const Status& analysis_status() const { return analysis_status_; }

 private:
  template <typename Call>
  void Analyze(Call call) {
    if (analysis_status_.ok()) analysis_status_ = call();
  }

  trace::SpanVisitor& view_;
  trace::SpanVisitor& analysis_;
  Status analysis_status_ = Status::Ok();
};

}  // namespace

Result<ViewedInputs> ViewInputs(const std::vector<fs::path>& inputs, const ViewOptions& options,
                                analyzer::ViewEventSink& sink) {
  RS_ASSIGN_OR_RETURN(const bool native, import::IsOneRankscopeRun(inputs));
  ViewedInputs viewed;
  viewed.display = Display(inputs);
  if (native) {
    analyzer::ViewLoadOptions load;
    load.classify = options.analyze.classify;
    load.threads = options.threads;
    load.progress = options.progress;
    RS_ASSIGN_OR_RETURN(analyzer::ViewRun run, analyzer::StreamRunEvents(inputs[0], load, sink));
    viewed.run = inputs[0];
    viewed.warnings = std::move(run.warnings);
    return viewed;
  }
  RS_ASSIGN_OR_RETURN(auto files, import::ForeignTraceFiles(inputs));
  viewed.foreign = true;
  analyzer::StreamedRunEvents view(options.analyze.classify, sink);
  analyzer::StreamedRunAnalysis analysis(options.analyze);
  std::mutex mutex;
  std::vector<std::unique_ptr<ViewAndAnalysis>> ranks;
  auto open_rank = [&](const fs::path& source) -> trace::SpanVisitor& {
    trace::SpanVisitor& view_rank = view.AddRank(source);
    trace::SpanVisitor& analysis_rank = analysis.AddRank(source);
    std::lock_guard<std::mutex> lock(mutex);
    ranks.push_back(std::make_unique<ViewAndAnalysis>(view_rank, analysis_rank));
    return *ranks.back();
  };
  RS_ASSIGN_OR_RETURN(viewed.notes, StreamInputs(files, options.threads, open_rank,
                                                 trace::StreamOptions{.host_calls = true}, options.progress));
  RS_ASSIGN_OR_RETURN(analyzer::ViewRun run, view.Finish(options.threads));
  viewed.warnings = std::move(run.warnings);
  Status analyzed = Status::Ok();
  for (const auto& rank : ranks) {
    if (!rank->analysis_status().ok()) {
      analyzed = rank->analysis_status();
      break;
    }
  }
  if (analyzed.ok()) {
    Result<analyzer::Report> report = analysis.Finish(viewed.display);
    if (report.ok()) {
      viewed.report = std::make_shared<const analyzer::Report>(std::move(report).value());
    } else {
      analyzed = report.status();
    }
  }
  if (!analyzed.ok()) viewed.analysis_error = analyzed.message();
  return viewed;
}

Result<AnalyzedInputs> AnalyzeInputs(const std::vector<fs::path>& inputs, const analyzer::AnalyzeOptions& options) {
  RS_ASSIGN_OR_RETURN(const bool native, import::IsOneRankscopeRun(inputs));
  if (native) {
    AnalyzedInputs analyzed;
    RS_ASSIGN_OR_RETURN(analyzed.report, analyzer::AnalyzeRun(inputs[0], options));
    analyzed.run = inputs[0];
    return analyzed;
  }
  RS_ASSIGN_OR_RETURN(auto files, import::ForeignTraceFiles(inputs));

  analyzer::StreamedRunAnalysis analysis(options);
  AnalyzedInputs analyzed;
  analyzed.foreign = true;
  RS_ASSIGN_OR_RETURN(analyzed.notes,
                      StreamInputs(
                          files, options.threads,
                          [&analysis](const fs::path& source) -> trace::SpanVisitor& { return analysis.AddRank(source); },
                          // The critical path follows launches and syncs: it needs the host calls.
                          trace::StreamOptions{.host_calls = options.critical_path}, nullptr));
  RS_ASSIGN_OR_RETURN(analyzed.report, analysis.Finish(Display(inputs)));
  return analyzed;
}

}  // namespace rankscope::interop
