// Internal: the pieces of docs/metrics.md §1 that the rank scanner applies row by row.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "analyzer/classify.h"
#include "trace/events.h"

namespace rankscope::analyzer {

// Whether `pattern` (not empty) occurs in `text`, ignoring ASCII case.
bool ContainsIgnoringCase(std::string_view text, std::string_view pattern);
// The class a user pattern gives `name` (comm patterns win); nullopt when none matches.
std::optional<ActivityClass> UserPatternClass(std::string_view name, const ClassifyOptions& options);

// The class an NVTX category gives its ranges, from the rank's "nvtx.category.<domain>.<id>"
// meta entries ("compute" or "comm"); nullopt for any other category.
std::optional<ActivityClass> CategoryClassByName(const std::map<std::string, std::string>& meta_entries,
                                                 const std::string& domain, uint32_t category);

// The class work on a lane of this role counts as; nullopt for kNone.
std::optional<ActivityClass> RoleClassOf(trace::LaneRole role);

}  // namespace rankscope::analyzer
