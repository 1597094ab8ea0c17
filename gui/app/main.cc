// rankscope-gui: the timeline viewer. Interactive by default; with --screenshot it renders
// one frame headlessly, and with --search alone it prints how many events match; both exit
// (0, or 2 with one "rankscope-gui: error: ..." line).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <QApplication>
#include <QStringList>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gui/widgets/main_window.h"
#include "gui/widgets/screenshot.h"

#ifndef RANKSCOPE_VERSION
#define RANKSCOPE_VERSION "unknown"
#endif

namespace {

constexpr int kExitUsage = 2;

void PrintError(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fputs(fmt::format("rankscope-gui: error: {}\n", line).c_str(), stderr);
  std::fflush(stderr);
}

bool HasEnv(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0';
}

// Screenshot mode owns stderr: only its own error line goes there, not Qt's chatter
// about the offscreen platform.
void QuietMessages(QtMsgType type, const QMessageLogContext&, const QString& message) {
  if (type == QtCriticalMsg || type == QtFatalMsg) {
    std::fputs(("rankscope-gui: qt: " + message.toStdString() + "\n").c_str(), stderr);
  }
}

int Main(int argc, char** argv) {
  CLI::App app(
      "rankscope-gui: the timeline viewer of rankscope runs. Opens run directories or rank files; "
      "with --screenshot, renders one frame to a PNG and exits.",
      "rankscope-gui");
  app.set_version_flag("--version", RANKSCOPE_VERSION);
  std::vector<std::string> paths;
  std::string screenshot, size = "1600x900", range, search;
  app.add_option("runs", paths, "run directories or rank files (rank-N.sqlite), each opened as one run");
  CLI::Option* screenshot_option =
      app.add_option("--screenshot", screenshot, "render the first run to this PNG (headless) and exit");
  app.add_option("--size", size, "window size of the screenshot, WIDTHxHEIGHT")
      ->capture_default_str()
      ->needs(screenshot_option);
  app.add_option("--range", range,
                 "time range of the screenshot relative to the run's start, e.g. 120ms..180ms "
                 "(default: the whole run)")
      ->needs(screenshot_option);
  app.add_option("--search", search,
                 "a search of event names (case-insensitive regex, as the search field): alone, print how many "
                 "events of the first run match and exit; with --screenshot, outline them in the picture");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    PrintError(fmt::format("{}; see rankscope-gui --help", error.what()));
    return kExitUsage;
  }

  const bool count_only = app.count("--search") > 0 && screenshot.empty();
  const bool headless = !screenshot.empty() || count_only;
  rankscope::gui::ScreenshotRequest request;
  if (count_only) {
    if (paths.empty()) {
      PrintError("--search needs a run directory, rank file or trace; see rankscope-gui --help");
      return kExitUsage;
    }
    if (search.empty()) {
      PrintError("--search needs a pattern; see rankscope-gui --help");
      return kExitUsage;
    }
    if (!HasEnv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    qInstallMessageHandler(QuietMessages);
  } else if (headless) {
    if (paths.empty()) {
      PrintError("--screenshot needs a run directory or rank file; see rankscope-gui --help");
      return kExitUsage;
    }
    auto parsed_size = rankscope::gui::ParseScreenshotSize(size);
    if (!parsed_size.ok()) {
      PrintError(parsed_size.status().message());
      return kExitUsage;
    }
    request.size = *parsed_size;
    request.output = QString::fromStdString(screenshot);
    for (const std::string& path : paths) request.runs << QString::fromStdString(path);
    if (app.count("--range") > 0) request.range = range;
    request.search = QString::fromStdString(search);
    // Deterministic rendering that needs no display.
    if (!HasEnv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QCoreApplication::setAttribute(Qt::AA_Use96Dpi);
    qInstallMessageHandler(QuietMessages);
  } else if (!HasEnv("QT_QPA_PLATFORM") && !HasEnv("DISPLAY") && !HasEnv("WAYLAND_DISPLAY")) {
    PrintError("no display: set DISPLAY (or QT_QPA_PLATFORM=offscreen), or use --screenshot");
    return kExitUsage;
  }

  // Qt sees no arguments of ours: the command line is CLI11's.
  int qt_argc = 1;
  char* qt_argv[] = {argv[0], nullptr};
  QApplication application(qt_argc, qt_argv);
  QApplication::setOrganizationName(QStringLiteral("rankscope"));
  QApplication::setApplicationName(QStringLiteral("rankscope-gui"));
  QApplication::setApplicationVersion(QStringLiteral(RANKSCOPE_VERSION));

  if (count_only) {
    const auto count = rankscope::gui::CountSearchMatches(QString::fromStdString(paths.front()),
                                                          QString::fromStdString(search));
    if (!count.ok()) {
      PrintError(count.status().message());
      return kExitUsage;
    }
    std::fputs(fmt::format("{}\n", *count).c_str(), stdout);
    return 0;
  }
  if (headless) {
    const rankscope::Status status = rankscope::gui::RenderScreenshot(request);
    if (!status.ok()) {
      PrintError(status.message());
      return kExitUsage;
    }
    std::fputs((screenshot + "\n").c_str(), stdout);
    return 0;
  }

  rankscope::gui::MainWindow window;
  window.show();
  for (const std::string& path : paths) window.openRun(QString::fromStdString(path));
  return application.exec();
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
