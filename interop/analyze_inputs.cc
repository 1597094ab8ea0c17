// Other tools' traces straight into the analysis: each input is read by its importer on a
// worker thread, its ranks streamed into the analyzer's scanners (RunSink's streamed
// ranks) instead of rank files, so nothing goes through SQLite.
#include <algorithm>
#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "interop/import_internal.h"
#include "interop/interop.h"
#include "trace/run_dir.h"

namespace rankscope::interop {
namespace fs = std::filesystem;

namespace {

// Reads every file on up to `threads` workers (0: one per hardware thread), each input into
// its own sink, inputs handed out in order (RankClaims relies on it). Returns the error of
// the lowest failed input; no input starts after a failure.
Status ReadInputs(const std::vector<std::pair<fs::path, TraceFormat>>& files, int threads,
                  std::vector<std::unique_ptr<import::RunSink>>& sinks) {
  const size_t count = files.size();
  std::vector<Status> statuses(count, Status::Ok());
  std::atomic<size_t> next{0};
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

}  // namespace

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
  const std::string run_id = trace::GenerateRunId();
  auto claims = std::make_shared<import::RankClaims>(/*ordered=*/true);
  std::vector<std::unique_ptr<import::RunSink>> sinks;
  for (size_t i = 0; i < files.size(); ++i) {
    sinks.push_back(std::make_unique<import::RunSink>(
        claims, i, [&analysis](const fs::path& source) -> trace::SpanVisitor& { return analysis.AddRank(source); },
        run_id));
  }
  RS_RETURN_IF_ERROR(ReadInputs(files, options.threads, sinks));
  std::vector<import::RunSink*> in_order;
  for (auto& sink : sinks) in_order.push_back(sink.get());
  ImportResult read;
  RS_RETURN_IF_ERROR(import::RunSink::FinishAll(in_order, &read));

  std::string display;
  for (const fs::path& input : inputs) display += (display.empty() ? "" : ", ") + input.string();
  AnalyzedInputs analyzed;
  analyzed.foreign = true;
  analyzed.notes = std::move(read.notes);
  RS_ASSIGN_OR_RETURN(analyzed.report, analysis.Finish(display));
  return analyzed;
}

}  // namespace rankscope::interop
