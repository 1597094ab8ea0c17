#include "gui/widgets/imported_details.h"

#include <QtConcurrent/QtConcurrent>

namespace rankscope::gui {

ImportedDetails::ImportedDetails(std::vector<std::filesystem::path> inputs, QObject* parent)
    : QObject(parent), inputs_(std::move(inputs)) {}

// An import still running finishes on its worker, and its temporary run is removed when its
// result is dropped: closing a run never waits for it.
ImportedDetails::~ImportedDetails() = default;

QString ImportedDetails::inputsText() const {
  QStringList names;
  for (const std::filesystem::path& input : inputs_) names << QString::fromStdString(input.string());
  return names.join(QStringLiteral(", "));
}

std::optional<Result<analyzer::EventDetails>> ImportedDetails::Find(int rank, analyzer::EventSource source,
                                                                    trace::LaneId lane, int64_t start_ns,
                                                                    int64_t end_ns) {
  if (!started_) {
    started_ = true;
    watcher_ = new QFutureWatcher<Outcome>(this);
    connect(watcher_, &QFutureWatcherBase::finished, this, [this] {
      Outcome outcome = watcher_->future().result();
      run_ = std::move(outcome.run);
      error_ = std::move(outcome.error);
      done_ = true;
      emit ready();
    });
    watcher_->setFuture(QtConcurrent::run([inputs = inputs_] {
      Outcome outcome;
      auto run = interop::ResolveRun(inputs);
      if (run.ok()) {
        outcome.run = std::shared_ptr<const interop::ResolvedRun>(std::move(run).value());
      } else {
        outcome.error = run.status();
      }
      return outcome;
    }));
  }
  if (!done_) return std::nullopt;
  if (!error_.ok()) return Result<analyzer::EventDetails>(error_);
  Result<std::filesystem::path> file = run_->RankFile(rank);
  if (!file.ok()) return Result<analyzer::EventDetails>(file.status());
  Result<analyzer::EventDetails> details = analyzer::ReadEventDetails(*file, source, lane, start_ns, end_ns);
  if (!details.ok()) return Result<analyzer::EventDetails>(Status(details.status().code(), run_->Describe(details.status().message())));
  return details;
}

}  // namespace rankscope::gui
