// The search field: a case-insensitive regular expression over event names (core
// FindEvents, at most kMatchLimit matches), "k of N", and next/previous in time (core
// NextMatch). An invalid expression shows its error in red and matches nothing.
#pragma once

#include <QWidget>

#include <cstdint>
#include <optional>
#include <vector>

#include "gui/core/timeline_model.h"

class QLabel;
class QLineEdit;
class QTimer;
class QToolButton;

namespace rankscope::gui {

class SearchBar : public QWidget {
  Q_OBJECT

 public:
  static constexpr size_t kMatchLimit = 100000;
  static constexpr int kDebounceMs = 250;

  explicit SearchBar(QWidget* parent = nullptr);

  // Not owned. Re-runs the current search on the new model.
  void setModel(const TimelineModel* model);
  QLineEdit* lineEdit() const { return edit_; }
  void focusSearch();  // Ctrl+F: focus and select the text

  // Runs the search for the field's text now (skipping the typing delay).
  void search();
  const std::vector<EventRef>& matches() const { return matches_; }
  bool valid() const { return error_.isEmpty(); }
  QString errorText() const { return error_; }
  // "k of N", "N matches", "no matches" or the error: what the status label shows.
  QString statusText() const;
  std::optional<size_t> current() const { return current_; }

  // The next (previous) match after (before) `time_ns`, wrapping; it becomes the current
  // one and is emitted as matchActivated. nullopt without matches.
  std::optional<EventRef> step(int64_t time_ns, bool forward);

 signals:
  // The set of matches changed (a new pattern or model).
  void matchesChanged();
  // Enter / F3 (forward) or Shift+Enter / Shift+F3 (backward) in the field.
  void stepRequested(bool forward);
  void matchActivated(const rankscope::gui::EventRef& ref);
  // Escape in the field: hand the focus back.
  void dismissed();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void UpdateStatus();

  const TimelineModel* model_ = nullptr;
  QLineEdit* edit_ = nullptr;
  QLabel* status_ = nullptr;
  QToolButton* previous_ = nullptr;
  QToolButton* next_ = nullptr;
  QTimer* debounce_ = nullptr;
  std::vector<EventRef> matches_;
  std::optional<size_t> current_;
  QString error_;
  bool truncated_ = false;
};

}  // namespace rankscope::gui
