#include "gui/widgets/details_panel.h"

#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

#include "analyzer/run_events.h"
#include "gui/core/queries.h"
#include "gui/core/run_end.h"
#include "gui/widgets/value_text.h"

namespace rankscope::gui {
namespace {

QString Row(const QString& label, const QString& value_html) {
  return QStringLiteral(
             "<tr><td style='color:#666; padding-right:10px; white-space:nowrap' valign='top'>%1</td>"
             "<td>%2</td></tr>")
      .arg(label.toHtmlEscaped(), value_html);
}

}  // namespace

DetailsPanel::DetailsPanel(QWidget* parent) : QWidget(parent), browser_(new QTextBrowser(this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(browser_);
  browser_->setOpenLinks(false);
  browser_->setOpenExternalLinks(false);
  connect(browser_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    if (url.scheme() == QLatin1String("event") && linked_) emit eventActivated(*linked_);
  });
  clear();
}

QString DetailsPanel::text() const { return browser_->toPlainText(); }

void DetailsPanel::setImportedDetails(ImportedDetails* details) {
  if (imported_ == details) return;
  if (imported_ != nullptr) disconnect(imported_, nullptr, this, nullptr);
  imported_ = details;
  if (details != nullptr) {
    connect(details, &ImportedDetails::ready, this, [this] {
      if (ref_) setEvent(model_, ref_);
    });
  }
}

void DetailsPanel::setEvent(const TimelineModel* model, std::optional<EventRef> ref) {
  model_ = model;
  ref_ = (model && ref && model->Contains(*ref)) ? ref : std::nullopt;
  linked_.reset();
  if (!ref_) {
    browser_->setHtml(tr("<p style='color:#777'>Click an event in the timeline to see its details.</p>"));
    return;
  }
  const EventRef& e = *ref_;
  const RankTimeline& rank = model->rank(e);
  const Track& track = rank.tracks[e.track];
  const EventRow& row = model->row(e);
  const int64_t start = model->DisplayStart(e);
  const int64_t end = model->DisplayEnd(e);
  const analyzer::EventSource source = model->SourceOf(e);

  // An end mark says what it is first; one the file holds as a row then shows that row.
  const EndMark* mark = model->FindEndMark(e);
  QString html = QStringLiteral("<h3 style='margin-bottom:4px'>%1</h3><table cellspacing='2'>")
                     .arg(HtmlText(mark ? mark->label : model->Name(e)));
  if (mark) {
    html += Row(tr("rank"), HtmlText(rank.Label()));
    for (const auto& [label, value] : EndMarkFields(*model, e, *mark)) {
      html += Row(QString::fromStdString(label), HtmlText(value));
    }
    if (!mark->file_row) {
      browser_->setHtml(html + QStringLiteral("</table>"));
      return;
    }
    html += tr("</table><p style='color:#666; margin:8px 0 2px 0'>As the file holds it:</p><table cellspacing='2'>");
  }
  // To the nanosecond: from the run's start, and on the run's common clock.
  auto when = [&](int64_t t) {
    return HtmlText(format::FormatExactSeconds(t - model->start_ns())) + tr(" from the run's start") +
           QStringLiteral(" · <span style='color:#666'>%1</span>")
               .arg(tr("%1 on the common clock").arg(HtmlText(format::FormatExactSeconds(t))));
  };
  html += Row(tr("start"), when(start));
  html += Row(tr("end"), when(end));
  html += Row(tr("duration"), DurationText(end - start) + tr(" (%L1 ns)").arg(end - start));
  html += Row(tr("rank"), HtmlText(rank.Label()));
  html += Row(tr("lane"), HtmlText(track.label) + (e.row > 0 ? tr(" (depth %1)").arg(e.row) : QString()));
  html += Row(tr("class"), HtmlText(analyzer::EventClassName(model->ClassOf(e))));
  html += Row(tr("kind"), HtmlText(analyzer::EventSourceName(source)));

  if (const auto peer = CorrelatedEvent(*model, e)) {
    linked_ = peer;
    const bool this_is_call = source == analyzer::EventSource::kApiCall;
    const int64_t peer_start = model->DisplayStart(*peer);
    const QString name = model->Name(*peer).empty() ? QString::fromUtf8(analyzer::EventSourceName(model->SourceOf(*peer)))
                                                    : QString::fromStdString(model->Name(*peer));
    const QString link = QStringLiteral("<a href='event:%1'>%2</a> (%3 %4)")
                             .arg(peer->index)
                             .arg(name.toHtmlEscaped(), this_is_call ? tr("starts at") : tr("call starts at"),
                                  HtmlText(format::FormatExactSeconds(peer_start - model->start_ns())));
    html += Row(this_is_call ? tr("launched") : tr("launched by"), link);
    // From the call's start to the device work's start.
    const int64_t latency = this_is_call ? peer_start - start : start - peer_start;
    html += Row(tr("launch latency"),
                DurationText(latency) + QStringLiteral(" <span style='color:#666'>%1</span>")
                                            .arg(this_is_call ? tr("(this call's start → the work's start)")
                                                              : tr("(the call's start → this one's start)")));
  }

  // Read back on demand from the rank file, on the rank's own clock; another tool's trace
  // through its one import.
  std::optional<Result<analyzer::EventDetails>> found;
  if (rank.rank_file) {
    found = analyzer::ReadEventDetails(rank.file, source, track.lane, row.start[e.index], row.end[e.index]);
  } else if (imported_ == nullptr) {
    found = Result<analyzer::EventDetails>(
        Unavailable(rank.file.string() + ": its events' fields are not available here (read without an import)"));
  } else {
    found = imported_->Find(rank.rank, source, track.lane, row.start[e.index], row.end[e.index]);
  }
  if (!found) {
    html += Row(tr("fields"), QStringLiteral("<span style='color:#777'>%1</span>")
                                  .arg(tr("reading %1 once for its events' fields…").arg(imported_->inputsText().toHtmlEscaped())));
    browser_->setHtml(html + QStringLiteral("</table>"));
    return;
  }
  const Result<analyzer::EventDetails>& details = *found;
  if (details.ok()) {
    bool has_correlation = false;
    for (const auto& [label, value] : details->fields) {
      has_correlation |= label == "correlation id";
      html += Row(QString::fromStdString(label), HtmlText(value).replace(QLatin1Char('\n'), QLatin1String("<br>")));
    }
    if (details->correlation_id != 0 && !has_correlation) {
      html += Row(tr("correlation id"), QString::number(details->correlation_id));
    }
  } else {
    html += Row(tr("details"),
                QStringLiteral("<span style='color:#a33'>%1</span>").arg(HtmlText(details.status().message())));
  }
  html += QStringLiteral("</table>");
  browser_->setHtml(html);
}

}  // namespace rankscope::gui
