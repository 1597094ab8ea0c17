// ComparableRun as JSON, for the report writers that embed it (report_json.cc,
// scaling_report.cc). Internal to analyzer/.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "compare/comparable.h"

namespace rankscope::compare {

nlohmann::ordered_json ComparableRunToJson(const ComparableRun& run);

}  // namespace rankscope::compare
