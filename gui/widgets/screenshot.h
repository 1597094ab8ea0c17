// The headless render behind `rankscope-gui RUN --screenshot out.png`: loads the runs and
// their analyses synchronously, sizes a MainWindow, sets the range, grabs it and writes
// a PNG. Needs a QApplication (any platform; offscreen is what the app picks).
#pragma once

#include <QSize>
#include <QString>
#include <QStringList>

#include <optional>
#include <string>

#include "base/status.h"

namespace rankscope::gui {

struct ScreenshotRequest {
  QStringList runs;  // run directories or rank files; the first is shown
  QString output;    // the PNG to write
  QSize size{1600, 900};
  std::optional<std::string> range;  // "t0..t1" relative to the run's start; none: fit
  QString search;  // a search to outline (the search field's regex); empty: none
};

// "1600x900" -> size. Errors name what is wrong (both sides 200..10000 pixels).
Result<QSize> ParseScreenshotSize(const std::string& text);

// Validates everything (size, range, search, output directory) before loading, so a bad
// request writes nothing; then renders. Errors are one line each.
Status RenderScreenshot(const ScreenshotRequest& request);

// `rankscope-gui RUN --search REGEX`: how many events of `run` the search field would
// match, exactly (no analysis is run). Errors: a bad pattern, a run that does not open.
Result<size_t> CountSearchMatches(const QString& run, const QString& pattern);

}  // namespace rankscope::gui
