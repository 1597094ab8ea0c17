// `rankscope ab`'s result (compare/ab.h, docs/metrics.md §8) in text, Markdown and JUnit XML,
// as `rankscope compare` writes its own: one row per metric and world size.
#pragma once

#include <string>
#include <vector>

#include "compare/ab.h"

namespace rankscope::report {

struct AbSummary {
  std::string a, b;     // the two command lines
  std::string stopped;  // why the pairs ended: "8 pairs, as --pairs asked"
  double seconds = 0;
  double confidence = 0.99;  // of the intervals
  std::vector<compare::AbRow> rows;
};

std::string AbToText(const AbSummary& summary);
std::string AbToMarkdown(const AbSummary& summary);
// One test case per metric and world size; a regression is a failure, "can't tell" a skip.
std::string AbToJUnit(const AbSummary& summary);

}  // namespace rankscope::report
