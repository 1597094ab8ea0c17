// The `rankscope` command: parses the command line with CLI11 and runs one subcommand.
// A subcommand is one file registering itself through cli/subcommand.h; add it to
// Subcommands() below.
#include <fmt/format.h>

#include <csignal>
#include <string>
#include <vector>

#include "cli/messages.h"
#include "cli/profile.h"
#include "cli/subcommand.h"

#ifndef RANKSCOPE_VERSION
#define RANKSCOPE_VERSION "unknown"
#endif

namespace rankscope::cli {
namespace {

std::vector<Subcommand> Subcommands(CLI::App& app) {
  std::vector<Subcommand> subcommands;
  subcommands.push_back(AddProfileSubcommand(app));
  subcommands.push_back(AddAnalyzeSubcommand(app));
  subcommands.push_back(AddScaleSubcommand(app));
  subcommands.push_back(AddCompareSubcommand(app));
  subcommands.push_back(AddSweepSubcommand(app));
  subcommands.push_back(AddAbSubcommand(app));
  subcommands.push_back(AddImportSubcommand(app));
  subcommands.push_back(AddExportSubcommand(app));
  return subcommands;
}

std::string SubcommandNames(const std::vector<Subcommand>& subcommands) {
  std::string names;
  for (const Subcommand& subcommand : subcommands) {
    names += (names.empty() ? "" : ", ") + subcommand.app->get_name();
  }
  return names;
}

int Main(int argc, char** argv) {
  // A reader that went away (`rankscope profile -- cmd 2>&1 | head`) must not kill rankscope
  // before it exits with the command's code. Children get default dispositions anyway.
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> options;
  CommandTail tail;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (tail.present) {
      tail.args.push_back(arg);
    } else if (arg == "--") {
      tail.present = true;
    } else {
      options.push_back(arg);
    }
  }

  CLI::App app("rankscope: profiles distributed training and shows where the time goes as ranks are added",
               "rankscope");
  app.set_version_flag("--version", RANKSCOPE_VERSION);
  app.require_subcommand(0, 1);
  const std::vector<Subcommand> subcommands = Subcommands(app);
  const std::string available = SubcommandNames(subcommands);

  if (options.empty() || options.front().empty()) {
    PrintError(stderr, fmt::format("missing subcommand (available: {}); see rankscope --help", available));
    return kExitUsage;
  }
  const auto is_subcommand = [&](const std::string& name) {
    for (const Subcommand& subcommand : subcommands) {
      if (subcommand.app->get_name() == name) return true;
    }
    return false;
  };
  if (options.front().front() != '-' && !is_subcommand(options.front())) {
    PrintError(stderr, fmt::format("unknown subcommand '{}' (available: {}); see rankscope --help",
                                   OneLine(options.front()), available));
    return kExitUsage;
  }

  std::vector<const char*> parse_argv = {argv[0]};
  for (const std::string& option : options) parse_argv.push_back(option.c_str());
  try {
    app.parse(static_cast<int>(parse_argv.size()), parse_argv.data());
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    const std::string help = is_subcommand(options.front()) ? "rankscope " + options.front() + " --help"
                                                            : std::string("rankscope --help");
    PrintError(stderr, fmt::format("{}; see {}", error.what(), help));
    return kExitUsage;
  }

  for (const Subcommand& subcommand : subcommands) {
    if (!subcommand.app->parsed()) continue;
    if (tail.present && !subcommand.takes_command) {
      PrintError(stderr, fmt::format("rankscope {} takes no command after '--'", subcommand.app->get_name()));
      return kExitUsage;
    }
    return subcommand.run(tail);
  }
  PrintError(stderr, fmt::format("missing subcommand (available: {}); see rankscope --help", available));
  return kExitUsage;
}

}  // namespace

}  // namespace rankscope::cli

int main(int argc, char** argv) { return rankscope::cli::Main(argc, argv); }
