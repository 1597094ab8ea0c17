#include "collector/cupti_tracer.h"

#include <deque>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "collector/cupti_records.h"
#include "collector/recorder.h"
#include "collector/stderr_line.h"

namespace rankscope::collector {
namespace {

class CuptiTracer final : public DeviceTracer {
 public:
  CuptiTracer(std::unique_ptr<CuptiSession> session, CuptiTracerOptions options)
      : session_(std::move(session)), options_(options), converter_(session_->api(), options.pid) {}

  void PushCorrelation(uint64_t range_id) override { session_->PushCorrelation(range_id); }
  void PopCorrelation() override { session_->PopCorrelation(); }

  void Drain(const DeviceEventSink& sink, const Submit& submit, bool flush, bool final) override {
    if (finished_) return;
    const auto now = std::chrono::steady_clock::now();
    if (final) {
      // The contexts are still alive: their per-stream drop counts can be read one last time.
      session_->CollectDropsOfLiveStreams();
      session_->Flush(/*forced=*/true);
    } else if (flush || now - last_flush_ >= options_.flush_interval) {
      session_->Flush(/*forced=*/false);
      last_flush_ = now;
    }
    if (!Convert(sink, submit) || !final) return;
    session_->Stop();
    Convert(sink, submit);  // anything CUPTI completed while stopping
    trace::EventTables tail;
    converter_.FlushPendingSyncs(sink, tail);
    submit(tail);
    finished_ = true;
  }

  bool finished() const override { return finished_; }

  std::vector<trace::DropRecord> TakeDrops() override {
    std::vector<trace::DropRecord> drops = session_->TakeDrops();
    const CuptiConversionStats& stats = converter_.stats();
    if (stats.invalid_timestamps > reported_invalid_) {
      drops.push_back({"cupti", "record without valid timestamps", -1, 0, 0, stats.invalid_timestamps - reported_invalid_});
      reported_invalid_ = stats.invalid_timestamps;
    }
    return drops;
  }

  std::vector<std::pair<std::string, std::string>> Meta() const override {
    const CuptiConversionStats& stats = converter_.stats();
    std::vector<std::pair<std::string, std::string>> meta = {
        {"cupti.status", "on"},
        {"cupti.version", std::to_string(session_->info().version)},
        {"cupti.clock", options_.session.tsc_timestamps ? "tsc" : "realtime"},
        {"cupti.kinds", fmt::format("{}", fmt::join(session_->info().kinds, ","))},
        {"cupti.records", std::to_string(stats.records)},
        {"cupti.buffers_refused", std::to_string(session_->buffers_refused())},
    };
    if (!session_->info().kinds_failed.empty()) {
      meta.emplace_back("cupti.kinds_failed", fmt::format("{}", fmt::join(session_->info().kinds_failed, "; ")));
    }
    if (stats.unknown_kinds > 0) meta.emplace_back("cupti.records_skipped", std::to_string(stats.unknown_kinds));
    if (stats.unfinished_buffers > 0) {
      meta.emplace_back("cupti.incomplete_buffers", std::to_string(stats.unfinished_buffers));
    }
    if (stats.memory_releases_clamped > 0) {
      meta.emplace_back("cupti.memory_releases_clamped", std::to_string(stats.memory_releases_clamped));
    }
    return meta;
  }

 private:
  // Converts waiting buffers oldest first while `submit` takes them; false when it stopped.
  bool Convert(const DeviceEventSink& sink, const Submit& submit) {
    for (const CompletedBuffer& buffer : session_->TakeCompleted()) waiting_.push_back(buffer);
    while (!waiting_.empty()) {
      trace::EventTables events;
      converter_.ConvertBuffer(sink, waiting_.front().data, waiting_.front().valid, events);
      session_->Recycle({waiting_.front()});
      waiting_.pop_front();
      if (!submit(events)) return false;
    }
    return true;
  }

  std::unique_ptr<CuptiSession> session_;
  const CuptiTracerOptions options_;
  CuptiConverter converter_;
  std::deque<CompletedBuffer> waiting_;  // completed by CUPTI, not converted yet
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  uint64_t reported_invalid_ = 0;
  bool finished_ = false;
};

}  // namespace

Result<std::unique_ptr<DeviceTracer>> StartCuptiTracer(CuptiApi& api, CuptiTracerOptions options) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<CuptiSession> session, CuptiSession::Start(api, options.session));
  return std::unique_ptr<DeviceTracer>(std::make_unique<CuptiTracer>(std::move(session), options));
}

bool StartCuptiTracing(Recorder& recorder, CuptiApi* api) {
  if (!recorder.recording() || recorder.has_device_tracer()) return recorder.has_device_tracer();
  if (!recorder.config().trace.cuda) {
    recorder.SetMeta("cupti.status", "off: not selected (--trace)");
    return false;
  }
  Status failure;
  if (api == nullptr) {
    Result<CuptiApi*> loaded = LoadCupti();
    if (loaded.ok()) api = *loaded;
    else failure = loaded.status();
  }
  if (api != nullptr) {
    CuptiTracerOptions options;
    options.pid = recorder.pid();
    options.session.tsc_timestamps = recorder.clock_source() == ClockSource::kTsc;
    Result<std::unique_ptr<DeviceTracer>> tracer = StartCuptiTracer(*api, options);
    if (tracer.ok()) {
      recorder.AttachDeviceTracer(std::move(*tracer));
      return true;
    }
    failure = tracer.status();
  }
  recorder.SetMeta("cupti.status", "off: " + failure.message());
  WriteStderrLine(fmt::format("rankscope: {}: CUDA activity is not recorded: {}; NVTX and NCCL recording go on",
                              recorder.describe_process(), failure.message()));
  return false;
}

}  // namespace rankscope::collector
