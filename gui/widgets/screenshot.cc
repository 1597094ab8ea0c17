#include "gui/widgets/screenshot.h"

#include <QApplication>
#include <QFileInfo>
#include <QImage>
#include <QLineEdit>
#include <QPixmap>
#include <QRegularExpression>
#include <QSaveFile>

#include <charconv>

#include <fmt/format.h>

#include "gui/core/time_view.h"
#include "base/format.h"
#include "gui/core/search.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/search_bar.h"
#include "gui/widgets/timeline_view.h"

namespace rankscope::gui {
namespace {

constexpr int kMinSide = 200;
constexpr int kMaxSide = 10000;

std::optional<int> ParseInt(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

Result<QSize> ParseScreenshotSize(const std::string& text) {
  const size_t x = text.find_first_of("xX");
  if (x == std::string::npos) return InvalidArgument("bad --size '" + text + "': expected WIDTHxHEIGHT, e.g. 1600x900");
  const auto width = ParseInt(std::string_view(text).substr(0, x));
  const auto height = ParseInt(std::string_view(text).substr(x + 1));
  if (!width || !height) return InvalidArgument("bad --size '" + text + "': expected WIDTHxHEIGHT, e.g. 1600x900");
  if (*width < kMinSide || *height < kMinSide || *width > kMaxSide || *height > kMaxSide) {
    return InvalidArgument("bad --size '" + text + "': each side must be " + std::to_string(kMinSide) + " to " +
                           std::to_string(kMaxSide) + " pixels");
  }
  return QSize(*width, *height);
}

namespace {

Status CheckPattern(const QString& pattern) {
  const QRegularExpression regex(pattern, QRegularExpression::CaseInsensitiveOption);
  if (!regex.isValid()) return InvalidArgument("bad --search: " + regex.errorString().toStdString());
  return Status::Ok();
}

}  // namespace

Result<size_t> CountSearchMatches(const QString& run, const QString& pattern) {
  RS_RETURN_IF_ERROR(CheckPattern(pattern));
  const QRegularExpression regex(pattern, QRegularExpression::CaseInsensitiveOption);
  interop::ViewedInputs viewed;
  RS_ASSIGN_OR_RETURN(std::unique_ptr<TimelineModel> model, LoadViewerModel(run.toStdString(), viewed));
  return SearchMatches::Find(*model, NameMatcher(regex)).size();
}

Status RenderScreenshot(const ScreenshotRequest& request) {
  if (request.runs.isEmpty()) return InvalidArgument("--screenshot needs a run directory or rank file");
  if (request.size.width() < kMinSide || request.size.height() < kMinSide || request.size.width() > kMaxSide ||
      request.size.height() > kMaxSide) {
    return InvalidArgument("bad screenshot size");
  }
  std::optional<RelativeRange> range;
  if (request.range) {
    std::string error;
    range = ParseRelativeRange(*request.range, &error);
    if (!range) return InvalidArgument("bad --range: " + error);
  }
  if (!request.search.isEmpty()) RS_RETURN_IF_ERROR(CheckPattern(request.search));
  const QFileInfo output(request.output);
  if (request.output.isEmpty()) return InvalidArgument("--screenshot needs an output file");
  const QFileInfo directory(output.absolutePath());
  if (!directory.isDir()) {
    return IoError("cannot write " + request.output.toStdString() + ": no directory " +
                   directory.absoluteFilePath().toStdString());
  }
  if (!directory.isWritable() || (output.exists() && (!output.isFile() || !output.isWritable()))) {
    return IoError("cannot write " + request.output.toStdString() + ": permission denied");
  }

  MainWindow window;
  window.setShowErrorDialogs(false);
  window.setRecordRecentFiles(false);
  QString failure;
  QObject::connect(&window, &MainWindow::loadFailed, [&failure](const QString& message) { failure = message; });
  for (const QString& run : request.runs) {
    if (!window.openRunBlocking(run)) {
      return Status(StatusCode::kInvalidArgument,
                    failure.isEmpty() ? "cannot open " + run.toStdString() : failure.toStdString());
    }
  }
  window.setCurrentRun(0);
  // Laid out and painted like a shown window, but never mapped on a screen.
  window.setAttribute(Qt::WA_DontShowOnScreen);
  window.resize(request.size);
  window.show();
  QApplication::processEvents();
  window.resize(request.size);
  QApplication::processEvents();

  TimelineView* timeline = window.timelineView();
  const TimelineModel* model = window.currentModel();
  if (range && model) {
    // A range past the run's end would render an empty picture: an error, as --range says.
    const int64_t duration = model->end_ns() - model->start_ns();
    if (range->start_ns >= duration) {
      return InvalidArgument(fmt::format("bad --range: {} starts after the run's end ({} long)", *request.range,
                                         format::FormatDuration(static_cast<double>(duration))));
    }
    timeline->setTimeRange(model->start_ns() + range->start_ns, model->start_ns() + range->end_ns);
  } else if (model) {
    timeline->setTimeRange(model->start_ns(), std::max(model->end_ns(), model->start_ns() + TimeView::kMinDurationNs));
  }
  if (!request.search.isEmpty()) {
    window.searchBar()->lineEdit()->setText(request.search);
    window.searchBar()->search();
  }
  QApplication::processEvents();
  const QImage image = window.grab().toImage();
  if (image.isNull()) return InternalError("the window rendered to an empty image");
  // Written to a temporary file beside the output and renamed over it once whole: a failed
  // write (a full disk) leaves no truncated PNG, and an earlier picture stays as it was.
  QSaveFile file(request.output);
  if (!file.open(QIODevice::WriteOnly)) {
    return IoError("cannot write " + request.output.toStdString() + ": " + file.errorString().toStdString());
  }
  if (!image.save(&file, "PNG") || !file.commit()) {
    const std::string why = file.errorString().toStdString();
    return IoError("cannot write " + request.output.toStdString() + (why.empty() ? "" : ": " + why));
  }
  return Status::Ok();
}

}  // namespace rankscope::gui
