// The scaling study (`rankscope scale`, `rankscope sweep`) in each output format. Every
// number comes from the ScalingTable (scaling.h); the writers only format.
#pragma once

#include <string>

#include "analyzer/compare.h"
#include "analyzer/scaling.h"

namespace rankscope::analyzer {

// The table practitioners publish (GPUs | Batch Size | Samples/sec | Scaling Efficiency),
// the columns that explain efficiency loss, the projection, and the runs.
std::string ScalingToText(const ScalingTable& table, const std::string& tool_version);
// Format "rankscope.scaling" (docs/report-json.md): the table, the projection and each
// run's comparable figures, so the file serves as a `rankscope compare` baseline.
std::string ScalingToJson(const ScalingTable& table, const std::string& tool_version);
std::string ScalingToMarkdown(const ScalingTable& table);
// A self-contained page with the charts as inline SVG (scaling_plot.h).
std::string ScalingToHtml(const ScalingTable& table, const std::string& tool_version);

// The comparison with a baseline: before / after / change / verdict per metric and world
// size, the reasons, and the notes.
std::string ComparisonToText(const Comparison& comparison);
std::string ComparisonToMarkdown(const Comparison& comparison);
// JUnit XML: one test case per metric and world size; regressions are failures.
std::string ComparisonToJUnit(const Comparison& comparison);

}  // namespace rankscope::analyzer
