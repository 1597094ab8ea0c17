// The "Details" tab: the selected event's name, times, rank, lane and class, the fields
// its rank file holds for it (analyzer::ReadEventDetails: payload, args, grid, bytes...; for
// another tool's trace through its ImportedDetails),
// and the correlated API call or device work as a link. For a collective in flight or a range
// open when its rank's file ended (an end mark), what it is first (EndMarkFields:
// communicator, sequence, op, bytes, peer, since when and for how long; thread, depth).
#pragma once

#include <QPointer>
#include <QWidget>

#include <optional>

#include "gui/core/timeline_model.h"
#include "gui/widgets/imported_details.h"

class QTextBrowser;

namespace rankscope::gui {

class DetailsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit DetailsPanel(QWidget* parent = nullptr);

  // Shows `ref` of `model` (reads its details from the rank file); nullopt clears. The
  // model must outlive the panel's use of it (until the next call).
  void setEvent(const TimelineModel* model, std::optional<EventRef> ref);
  void clear() { setEvent(nullptr, std::nullopt); }
  // Where the fields of a rank that is no rank file (another tool's trace, read directly)
  // come from: the run's ImportedDetails, or null (then they are said to be unavailable).
  // The panel shows "reading…" while it imports, and the fields once it is done.
  void setImportedDetails(ImportedDetails* details);

  std::optional<EventRef> currentEvent() const { return ref_; }
  // The "launched by" (or "launched") event shown as a link, if any.
  std::optional<EventRef> linkedEvent() const { return linked_; }
  // The panel's text, as shown (for tests).
  QString text() const;

 signals:
  // The user clicked the correlated event's link.
  void eventActivated(const rankscope::gui::EventRef& ref);

 private:
  QTextBrowser* browser_ = nullptr;
  const TimelineModel* model_ = nullptr;
  std::optional<EventRef> ref_;
  std::optional<EventRef> linked_;
  QPointer<ImportedDetails> imported_;
};

}  // namespace rankscope::gui
