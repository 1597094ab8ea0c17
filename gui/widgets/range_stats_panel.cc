#include "gui/widgets/range_stats_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QThreadPool>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>
#include <map>

#include "gui/core/lod.h"
#include "gui/core/queries.h"
#include "gui/widgets/value_text.h"

namespace rankscope::gui {
namespace {

// Events of `model` overlapping [t0, t1): a binary search per row.
size_t EstimateEvents(const TimelineModel& model, int64_t t0, int64_t t1) {
  size_t events = 0;
  for (const RankTimeline& rank : model.ranks()) {
    for (const Track& track : rank.tracks) {
      for (const EventRow& row : track.rows) {
        const int64_t a = t0 - rank.clock_offset_ns;
        const int64_t b = t1 - rank.clock_offset_ns;
        const size_t first = FirstEndingAfter(row, a);
        const size_t last = std::lower_bound(row.start.begin(), row.start.end(), b) - row.start.begin();
        if (last > first) events += last - first;
      }
    }
  }
  return events;
}

// Breakdown numbers are formatted as `rankscope analyze` formats them (value_text.h). Two
// lines, the time over its share, so that six columns fit a narrow side panel.
QString DurationWithShare(int64_t ns, int64_t window) {
  const double pct = window > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(window) : 0.0;
  return QStringLiteral("%1\n%2").arg(DurationText(ns), PercentText(pct));
}

QTableWidgetItem* Cell(const QString& text, bool numeric) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  if (numeric) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

QTableWidget* MakeTable(const QStringList& header, QWidget* parent) {
  auto* table = new QTableWidget(0, header.size(), parent);
  table->setHorizontalHeaderLabels(header);
  table->verticalHeader()->hide();
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->horizontalHeader()->setStretchLastSection(true);
  table->setAlternatingRowColors(true);
  table->setWordWrap(false);
  // Compact: a row of numbers per device should fit the side panel without scrolling.
  QFont font = table->font();
  font.setPointSizeF(font.pointSizeF() * 0.9);
  table->setFont(font);
  table->verticalHeader()->setDefaultSectionSize(QFontMetrics(font).height() + 6);
  return table;
}

QThreadPool* MeasurePool() {
  // One measurement at a time: a newer range replaces an older one anyway.
  static QThreadPool* pool = [] {
    auto* p = new QThreadPool();
    p->setMaxThreadCount(1);
    return p;
  }();
  return pool;
}

}  // namespace

RangeStatsPanel::RangeStatsPanel(QWidget* parent)
    : QWidget(parent),
      title_(new QLabel(this)),
      devices_(MakeTable({tr("Rank"), tr("Compute"), tr("Comm"), tr("Overlap"), tr("Idle"), tr("Util")}, this)),
      top_(MakeTable({tr("Name"), tr("Class"), tr("Count"), tr("Time")}, this)),
      watcher_(new QFutureWatcher<std::vector<analyzer::RangeDeviceStats>>(this)) {
  auto* layout = new QVBoxLayout(this);
  title_->setWordWrap(true);
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(title_);
  devices_->horizontalHeader()->setStretchLastSection(false);
  // The numbers share what the rank column leaves, so the table never scrolls sideways.
  for (int column = 1; column < devices_->columnCount(); ++column) {
    devices_->horizontalHeader()->setSectionResizeMode(column, QHeaderView::Stretch);
  }
  devices_->verticalHeader()->setDefaultSectionSize(2 * devices_->fontMetrics().height() + 6);
  layout->addWidget(devices_, 3);
  auto* top_label = new QLabel(tr("Top activities in the range (device time, summed over ranks)"), this);
  top_label->setWordWrap(true);
  layout->addWidget(top_label);
  layout->addWidget(top_, 2);
  top_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  top_->horizontalHeader()->setStretchLastSection(false);
  connect(watcher_, &QFutureWatcherBase::finished, this, [this] {
    if (!pending_ || watched_generation_ != generation_ || watcher_->future().resultCount() == 0) return;
    Show(watcher_->future().result());
  });
  clear();
}

RangeStatsPanel::~RangeStatsPanel() {
  // The job holds its own reference to the model; only our watcher must stop listening.
  watcher_->disconnect(this);
}

bool RangeStatsPanel::busy() const { return watcher_->isRunning(); }

void RangeStatsPanel::clear() {
  ++generation_;
  pending_ = false;
  model_.reset();
  stats_.clear();
  t0_ = t1_ = 0;
  title_->setText(tr("Shift+drag in the timeline (or drag on its time axis) to measure a range."));
  devices_->setRowCount(0);
  top_->setRowCount(0);
}

void RangeStatsPanel::waitForIdle() {
  MeasurePool()->waitForDone();
  if (pending_ && watched_generation_ == generation_ && watcher_->future().isFinished() &&
      watcher_->future().resultCount() > 0) {
    Show(watcher_->future().result());
  }
}

void RangeStatsPanel::setRange(std::shared_ptr<const TimelineModel> model, int64_t t0, int64_t t1) {
  if (t1 < t0) std::swap(t0, t1);
  const uint64_t generation = ++generation_;
  model_ = std::move(model);
  t0_ = t0;
  t1_ = t1;
  if (!model_) {
    clear();
    return;
  }
  span_text_ = tr("Range %1 .. %2 after the run's start (%3)")
                   .arg(DurationText(t0 - model_->start_ns()),
                        DurationText(t1 - model_->start_ns()),
                        DurationText(t1 - t0));
  if (EstimateEvents(*model_, t0, t1) <= kSyncEventLimit) {
    pending_ = false;
    Show(MeasureDisplayRange(*model_, t0, t1, kTopActivities));
    return;
  }
  title_->setText(span_text_ + tr(" — measuring…"));
  pending_ = true;
  watched_generation_ = generation;
  std::shared_ptr<const TimelineModel> keep = model_;
  watcher_->setFuture(
      QtConcurrent::run(MeasurePool(), [keep, t0, t1] { return MeasureDisplayRange(*keep, t0, t1, kTopActivities); }));
}

void RangeStatsPanel::Show(std::vector<analyzer::RangeDeviceStats> stats) {
  stats_ = std::move(stats);
  pending_ = false;
  title_->setText(stats_.empty() ? span_text_ + tr("\nNo device activity in this range.") : span_text_);
  devices_->setRowCount(static_cast<int>(stats_.size()));
  std::map<std::pair<std::string, int>, std::pair<int64_t, int64_t>> top;  // (name, class) -> (count, ns)
  for (size_t i = 0; i < stats_.size(); ++i) {
    const analyzer::RangeDeviceStats& s = stats_[i];
    const analyzer::Breakdown& b = s.breakdown;
    const int r = static_cast<int>(i);
    auto* device = Cell(
        s.device == analyzer::kCpuDevice ? tr("%1 · cpu").arg(s.rank) : tr("%1 · gpu %2").arg(s.rank).arg(s.device),
        false);
    device->setToolTip(tr("window %1, exposed comm %2, memory %3")
                           .arg(DurationText(b.window_ns), DurationText(b.exposed_comm_ns), DurationText(b.memory_ns)));
    devices_->setItem(r, 0, device);
    devices_->setItem(r, 1, Cell(DurationWithShare(b.compute_ns, b.window_ns), true));
    devices_->setItem(r, 2, Cell(DurationWithShare(b.comm_ns, b.window_ns), true));
    devices_->setItem(r, 3, Cell(DurationWithShare(b.overlap_ns, b.window_ns), true));
    devices_->setItem(r, 4, Cell(DurationWithShare(b.idle_ns, b.window_ns), true));
    devices_->setItem(r, 5, Cell(PercentText(b.utilization_pct), true));
    for (const analyzer::ActivitySummary& a : s.top) {
      auto& entry = top[{a.name, static_cast<int>(a.activity_class)}];
      entry.first += a.count;
      entry.second += a.total_ns;
    }
  }
  std::vector<std::pair<std::pair<std::string, int>, std::pair<int64_t, int64_t>>> sorted(top.begin(), top.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  if (sorted.size() > kTopActivities) sorted.resize(kTopActivities);
  top_->setRowCount(static_cast<int>(sorted.size()));
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& [key, value] = sorted[i];
    const int r = static_cast<int>(i);
    top_->setItem(r, 0, Cell(QString::fromStdString(key.first), false));
    top_->setItem(
        r, 1,
        Cell(QString::fromUtf8(analyzer::ActivityClassName(static_cast<analyzer::ActivityClass>(key.second))), false));
    top_->setItem(r, 2, Cell(QString::number(value.first), true));
    top_->setItem(r, 3, Cell(DurationText(value.second), true));
  }
  emit statsReady(t0_, t1_);
}

}  // namespace rankscope::gui
