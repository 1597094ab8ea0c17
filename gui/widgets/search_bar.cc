#include "gui/widgets/search_bar.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QTimer>
#include <QToolButton>

#include <string_view>
#include <unordered_map>

#include "gui/core/queries.h"

namespace rankscope::gui {

std::function<bool(std::string_view)> NameMatcher(const QRegularExpression& regex) {
  return [&regex](std::string_view name) {
    return regex.match(QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()))).hasMatch();
  };
}

SearchBar::SearchBar(QWidget* parent)
    : QWidget(parent),
      edit_(new QLineEdit(this)),
      status_(new QLabel(this)),
      previous_(new QToolButton(this)),
      next_(new QToolButton(this)),
      debounce_(new QTimer(this)) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  edit_->setPlaceholderText(tr("Search events (regex, Ctrl+F)"));
  edit_->setClearButtonEnabled(true);
  edit_->setMinimumWidth(80);
  edit_->installEventFilter(this);
  previous_->setText(QStringLiteral("▲"));
  previous_->setToolTip(tr("Previous match (Shift+Enter, Shift+F3)"));
  next_->setText(QStringLiteral("▼"));
  next_->setToolTip(tr("Next match (Enter, F3)"));
  status_->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Preferred);
  layout->addWidget(edit_, 1);
  layout->addWidget(previous_);
  layout->addWidget(next_);
  layout->addWidget(status_);
  debounce_->setSingleShot(true);
  debounce_->setInterval(kDebounceMs);
  connect(debounce_, &QTimer::timeout, this, &SearchBar::search);
  connect(edit_, &QLineEdit::textChanged, debounce_, qOverload<>(&QTimer::start));
  connect(previous_, &QToolButton::clicked, this, [this] { emit stepRequested(false); });
  connect(next_, &QToolButton::clicked, this, [this] { emit stepRequested(true); });
  UpdateStatus();
}

void SearchBar::setModel(const TimelineModel* model) {
  model_ = model;
  search();
}

void SearchBar::focusSearch() {
  edit_->setFocus(Qt::ShortcutFocusReason);
  edit_->selectAll();
}

void SearchBar::search() {
  debounce_->stop();
  auto found = std::make_shared<SearchMatches>();
  current_.reset();
  error_.clear();
  const QString pattern = edit_->text();
  if (!pattern.isEmpty()) {
    const QRegularExpression regex(pattern, QRegularExpression::CaseInsensitiveOption);
    if (!regex.isValid()) {
      error_ = tr("invalid regex: %1").arg(regex.errorString());
    } else if (model_) {
      *found = SearchMatches::Find(*model_, NameMatcher(regex));
    }
  }
  matches_ = std::move(found);
  UpdateStatus();
  emit matchesChanged();
}

std::optional<EventRef> SearchBar::step(int64_t time_ns, bool forward) {
  if (!model_) return std::nullopt;
  const std::optional<EventRef> match = matches_->StepFromTime(*model_, time_ns, forward);
  Activate(match);
  return match;
}

std::optional<EventRef> SearchBar::stepFrom(const EventRef& from, bool forward) {
  if (!model_ || !model_->Contains(from)) return std::nullopt;
  const std::optional<EventRef> match = matches_->Step(*model_, from, forward);
  Activate(match);
  return match;
}

void SearchBar::Activate(std::optional<EventRef> match) {
  if (!match) return;
  current_ = match;
  UpdateStatus();
  emit matchActivated(*match);
}

QString SearchBar::statusText() const { return status_->text(); }

void SearchBar::UpdateStatus() {
  const bool has = !matches_->empty();
  previous_->setEnabled(has);
  next_->setEnabled(has);
  if (!error_.isEmpty()) {
    // Short beside the field, whole in the tooltips: a long message must not squeeze the field.
    SetStatus(tr("invalid regex"));
    status_->setToolTip(error_);
    edit_->setToolTip(error_);
    status_->setStyleSheet(QStringLiteral("color: #c62828;"));
    edit_->setStyleSheet(QStringLiteral("QLineEdit { color: #c62828; }"));
    return;
  }
  status_->setStyleSheet(QString());
  edit_->setStyleSheet(QString());
  status_->setToolTip(QString());
  edit_->setToolTip(QString());
  const QString total = QStringLiteral("%L1").arg(matches_->size());
  if (edit_->text().isEmpty()) {
    SetStatus({});
  } else if (!has) {
    SetStatus(tr("no matches"));
  } else if (current_) {
    SetStatus(tr("%L1 of %2").arg(matches_->PositionOf(*model_, *current_) + 1).arg(total));
  } else {
    SetStatus(tr("%1 matches").arg(total));
  }
}

void SearchBar::SetStatus(const QString& text) {
  status_->setText(text);
  // Exactly as wide as the text: the field, not the count, gives way in a narrow window.
  status_->setFixedWidth(text.isEmpty() ? 0 : status_->fontMetrics().horizontalAdvance(text) + 6);
}

bool SearchBar::eventFilter(QObject* watched, QEvent* event) {
  if (watched == edit_ && event->type() == QEvent::KeyPress) {
    auto* key = static_cast<QKeyEvent*>(event);
    if (key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) {
      if (debounce_->isActive()) search();
      emit stepRequested(!(key->modifiers() & Qt::ShiftModifier));
      return true;
    }
    if (key->key() == Qt::Key_Escape) {
      emit dismissed();
      return true;
    }
  }
  return QWidget::eventFilter(watched, event);
}

}  // namespace rankscope::gui
