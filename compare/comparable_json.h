// ComparableRun as JSON: the baseline format that report/ embeds in its JSON reports
// (report_json.cc, scaling_report.cc) and ParseComparableJson reads back.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "compare/comparable.h"

namespace rankscope::compare {

nlohmann::ordered_json ComparableRunToJson(const ComparableRun& run);

}  // namespace rankscope::compare
