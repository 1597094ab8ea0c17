// The fields of events of another tool's trace (grid, bytes, args...). The viewer reads such
// a trace straight into its model, without rank files (interop::ViewInputs); the first time a
// user asks for an event's fields, the trace's inputs are imported once into a temporary run
// (interop::ResolveRun) on a worker thread, and every later request reads that run's rank
// files as for a rankscope run. The temporary run goes with this object (the run's close).
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QString>

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "analyzer/run_events.h"
#include "base/status.h"
#include "interop/interop.h"

namespace rankscope::gui {

class ImportedDetails : public QObject {
  Q_OBJECT

 public:
  explicit ImportedDetails(std::vector<std::filesystem::path> inputs, QObject* parent = nullptr);
  ~ImportedDetails() override;

  // The event's fields once the import is done; nullopt while it runs (the first call starts
  // it, and `ready` says when it ended). An import that failed fails every lookup with its
  // error.
  std::optional<Result<analyzer::EventDetails>> Find(int rank, analyzer::EventSource source, trace::LaneId lane,
                                                     int64_t start_ns, int64_t end_ns);
  bool importing() const { return started_ && !done_; }
  bool imported() const { return run_ != nullptr; }
  // For the panel's "reading …" line: what is being imported.
  QString inputsText() const;

 signals:
  void ready();

 private:
  struct Outcome {
    std::shared_ptr<const interop::ResolvedRun> run;
    Status error = Status::Ok();
  };

  std::vector<std::filesystem::path> inputs_;
  QFutureWatcher<Outcome>* watcher_ = nullptr;
  bool started_ = false, done_ = false;
  std::shared_ptr<const interop::ResolvedRun> run_;
  Status error_ = Status::Ok();
};

}  // namespace rankscope::gui
