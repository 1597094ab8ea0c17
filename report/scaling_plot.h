// The scaling charts: efficiency and throughput against world size, beside the ideal, with
// the projection dashed. Drawn once through a canvas, so the HTML report's inline SVG and
// the PNG for CI artifacts are the same picture.
#pragma once

#include <filesystem>
#include <string>

#include "compare/scaling.h"
#include "base/status.h"

namespace rankscope::report {

inline constexpr int kScalingPlotWidth = 960;
inline constexpr int kScalingPlotHeight = 400;

// One <svg> element (no XML prolog), to be placed inside an HTML page.
std::string ScalingPlotSvg(const compare::ScalingTable& table);

// A PNG of kScalingPlotWidth × kScalingPlotHeight pixels, written through a temporary
// file and a rename (an existing file is replaced only on success). Errors: IoError naming
// the path.
Status WriteScalingPlotPng(const compare::ScalingTable& table, const std::filesystem::path& path);

}  // namespace rankscope::report
