// The class docs/metrics.md §1 gives each streamed row, with per-name caches: one classifier
// for the rank scanner (metrics) and the viewer (colors, range statistics), so the two
// can never disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/classify.h"
#include "trace/reader.h"

namespace rankscope::analyzer {

class SpanClassifier {
 public:
  explicit SpanClassifier(ClassifyOptions options);

  // Starts a rank: clears the caches. `header` (strings, lanes, meta) must outlive the calls
  // until the next Reset.
  void Reset(const trace::StreamHeader* header);

  // Device work of a kernel of this name, by name rules and user patterns.
  ActivityClass KernelClass(trace::StringId name);
  // Device work of an NVTX range (CPU backend: its category, then its lane's role, then
  // user patterns); nullopt for an annotation.
  std::optional<ActivityClass> RangeClass(const trace::SpanRow& row);
  // Any streamed row: its device class, else annotation, API call or sync.
  EventClass Classify(trace::SpanTable table, const trace::SpanRow& row);

  const ClassifyOptions& options() const { return options_; }

 private:
  const std::string& Str(trace::StringId id) const;

  ClassifyOptions options_;
  const trace::StreamHeader* header_ = nullptr;
  std::vector<int8_t> kernel_class_;  // per StringId, unknown until first seen
  std::vector<int8_t> user_class_;    // per StringId: user pattern verdict
  std::unordered_map<uint64_t, int8_t> category_class_;  // (domain << 32 | category)
};

}  // namespace rankscope::analyzer
