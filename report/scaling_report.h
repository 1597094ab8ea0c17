// The scaling study (`rankscope scale`, `rankscope sweep`) in each output format. Every
// number comes from the ScalingTable (scaling.h); the writers only format.
#pragma once

#include <string>

#include "compare/compare.h"
#include "compare/scaling.h"

namespace rankscope::report {

// The table practitioners publish (GPUs | Batch Size | Samples/sec | Scaling Efficiency),
// the columns that explain efficiency loss, the projection, and the runs.
std::string ScalingToText(const compare::ScalingTable& table, const std::string& tool_version);
// Format "rankscope.scaling" (docs/report-json.md): the table, the projection and each
// run's comparable figures, so the file serves as a `rankscope compare` baseline.
std::string ScalingToJson(const compare::ScalingTable& table, const std::string& tool_version);
std::string ScalingToMarkdown(const compare::ScalingTable& table);
// A self-contained page with the charts as inline SVG (scaling_plot.h).
std::string ScalingToHtml(const compare::ScalingTable& table, const std::string& tool_version);

// The comparison with a baseline: before / after / change / verdict per metric and world
// size, the reasons, and the notes.
std::string ComparisonToText(const compare::Comparison& comparison);
std::string ComparisonToMarkdown(const compare::Comparison& comparison);
// JUnit XML: one test case per metric and world size; regressions are failures.
std::string ComparisonToJUnit(const compare::Comparison& comparison);

}  // namespace rankscope::report
