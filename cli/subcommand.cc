#include "cli/subcommand.h"

#include <fmt/format.h>

#include "cli/messages.h"

namespace rankscope::cli {

std::string DescribeExtras(const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining();
  if (extras.empty()) return "";
  const std::string& first = extras.front();
  const std::string name = app.get_name();
  if (!first.empty() && first.front() == '-') {
    return fmt::format("unknown option '{}' for rankscope {}; see rankscope {} --help", OneLine(first), name,
                       name);
  }
  return fmt::format(
      "unexpected argument '{}': put the command after '--' (rankscope {} [OPTIONS] -- CMD ARGS...)",
      OneLine(first), name);
}

}  // namespace rankscope::cli
