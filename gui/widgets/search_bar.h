// The search field: a case-insensitive regular expression over the names of every event
// (core SearchMatches: no limit, the count is exact), "k of N", and next/previous in time
// through every match. An invalid expression shows its error in red and matches nothing.
#pragma once

#include <QRegularExpression>
#include <QWidget>

#include <cstdint>
#include <functional>
#include <string_view>
#include <memory>
#include <optional>
#include <vector>

#include "gui/core/search.h"
#include "gui/core/timeline_model.h"

class QLabel;
class QLineEdit;
class QTimer;
class QToolButton;

namespace rankscope::gui {

// The search field's rule for a pattern: a case-insensitive regular expression over an
// event's name (`regex` must outlive the predicate).
std::function<bool(std::string_view)> NameMatcher(const QRegularExpression& regex);

class SearchBar : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kDebounceMs = 250;

  explicit SearchBar(QWidget* parent = nullptr);

  // Not owned. Re-runs the current search on the new model.
  void setModel(const TimelineModel* model);
  QLineEdit* lineEdit() const { return edit_; }
  void focusSearch();  // Ctrl+F: focus and select the text

  // Runs the search for the field's text now (skipping the typing delay).
  void search();
  // Every match of the model (never null).
  const std::shared_ptr<const SearchMatches>& matches() const { return matches_; }
  bool valid() const { return error_.isEmpty(); }
  QString errorText() const { return error_; }
  // "k of N", "N matches", "no matches" or "invalid regex" (errorText() has why): what the
  // status label shows.
  QString statusText() const;
  // The match last stepped to.
  std::optional<EventRef> current() const { return current_; }

  // The next (previous) match starting after (before) `time_ns`, wrapping; it becomes the
  // current one and is emitted as matchActivated. nullopt without matches.
  std::optional<EventRef> step(int64_t time_ns, bool forward);
  // The same from an event of the model (the selection): the match after (before) it in
  // time, ties broken by rank, lane and row, so equal starts are each reached once.
  std::optional<EventRef> stepFrom(const EventRef& from, bool forward);

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
  void SetStatus(const QString& text);

  const TimelineModel* model_ = nullptr;
  QLineEdit* edit_ = nullptr;
  QLabel* status_ = nullptr;
  QToolButton* previous_ = nullptr;
  QToolButton* next_ = nullptr;
  QTimer* debounce_ = nullptr;
  void Activate(std::optional<EventRef> match);

  std::shared_ptr<const SearchMatches> matches_ = std::make_shared<SearchMatches>();
  std::optional<EventRef> current_;
  QString error_;
};

}  // namespace rankscope::gui
