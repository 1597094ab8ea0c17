#include "trace/trace_selection.h"

#include <fmt/format.h>

#include "base/text.h"

namespace rankscope::trace {
namespace {

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string TraceSelection::ToList() const {
  std::string list;
  auto add = [&list](bool selected, const char* name) {
    if (!selected) return;
    if (!list.empty()) list += ',';
    list += name;
  };
  add(nvtx, "nvtx");
  add(cuda, "cuda");
  add(nccl, "nccl");
  return list;
}

Result<TraceSelection> ParseTraceList(std::string_view list) {
  if (TrimBlanks(list).empty()) {
    return InvalidArgument(fmt::format("the trace list needs at least one of {}", kValidTraceItems));
  }
  TraceSelection selection;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view item = TrimBlanks(list.substr(0, comma));
    if (item == "nvtx") {
      selection.nvtx = true;
    } else if (item == "cuda") {
      selection.cuda = true;
    } else if (item == "nccl") {
      selection.nccl = true;
    } else if (item.empty()) {
      return InvalidArgument(fmt::format("the trace list has an empty item; valid items: {}", kValidTraceItems));
    } else {
      return InvalidArgument(
          fmt::format("unknown trace item {}; valid items: {}", Printable(item), kValidTraceItems));
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return selection;
}

}  // namespace rankscope::trace
