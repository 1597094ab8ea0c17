// The class docs/metrics.md §1 gives each streamed row, with per-name caches: one classifier
// for the rank scanner (metrics) and the viewer (colors, range statistics), so the two
// can never disagree.
//
// The CPU-side rule (§1, "CPU-side distributed traces") classes ranges only on a rank without
// device activity, and only the outermost CPU operators of each thread: both are known
// once the rank's last row has streamed. Until then the rule's candidates are *deferred*:
// the caller holds them back and asks ResolveDeferred for their classes at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analyzer/classify.h"
#include "trace/reader.h"

namespace rankscope::analyzer {

// N of "ProfilerStep#N", PyTorch profiler's step ranges; nullopt for any other name.
std::optional<int64_t> ProfilerStepNumber(std::string_view name);
// Whether a range's payload (trace::PayloadKind) is an integer.
bool IsIntegerPayload(uint32_t payload_kind);
// A step range's number (docs/metrics.md §2): its args' "step", else N of ProfilerStep#N,
// else an integer payload; nullopt when it has none.
std::optional<int64_t> StepNumberOf(std::optional<int64_t> args_step, std::string_view name, uint32_t payload_kind,
                                    int64_t payload_int);

// The number of bytes a Kineto CPU operator's args name, from the payload JSON: its integer
// "bytes" field, else Σ over the inputs of Π "Input Dims" × the element size of its "Input
// type" (tensor inputs of a known type only); 0 when unknown.
uint64_t PayloadBytes(std::string_view args_json);

// What a comm range's args say: its bytes (PayloadBytes) and, under the `rankscope
// collective` convention (trainer/README.md), its communicator, its rank there, a
// point-to-point peer and its bucket label.
struct CommRangeArgs {
  uint64_t bytes = 0;
  std::optional<uint64_t> comm;
  int32_t comm_rank = -1;
  int32_t peer = -1;  // -1: not point to point
  int64_t label = -1;
};
CommRangeArgs ReadCommRangeArgs(std::string_view args_json);

// The class of one NVTX range.
struct RangeVerdict {
  std::optional<ActivityClass> activity_class;  // nullopt: an annotation (so far)
  // Only the CPU-side rule can still class it: hold it back until ResolveDeferred.
  bool deferred = false;
};

class SpanClassifier {
 public:
  explicit SpanClassifier(ClassifyOptions options, std::vector<std::string> step_names = DefaultStepNames());

  // Starts a rank: clears the caches and the deferred ranges. `header` (strings, lanes,
  // meta) must outlive the calls until the next Reset.
  void Reset(const trace::StreamHeader* header);
  // The header's strings or lanes grew, or its meta changed (a stream that learns its rank
  // as it goes): the caches cover the new strings; what is known stays.
  void HeaderGrew();

  // Whether a range of this name is a step range (§2: a step name in any case, or
  // ProfilerStep#N). Steps are never device work.
  bool IsStep(trace::StringId name);
  // Device work of a kernel of this name, by name rules and user patterns.
  ActivityClass KernelClass(trace::StringId name);
  // A kernel, copy or set: its class. Each one with a duration gives the rank device
  // activity, which turns the CPU-side rule off.
  ActivityClass DeviceRowClass(trace::SpanTable table, const trace::SpanRow& row);
  // An NVTX range (not a step): user patterns, then its category, then its lane's role; a
  // range none of these class is deferred when the CPU-side rule may class it.
  RangeVerdict ClassifyRange(const trace::SpanRow& row);
  // After the rank's last row: the class of each deferred range, in the order they were
  // deferred. Leaves none deferred.
  std::vector<std::optional<ActivityClass>> ResolveDeferred();
  // Whether the CPU-side rule applies to the rank: no device activity (kernels, copies,
  // sets, ranges classed by category or lane role) among the rows seen so far.
  bool CpuSideRuleApplies() const { return !device_activity_; }

  const ClassifyOptions& options() const { return options_; }

 private:
  const std::string& Str(trace::StringId id) const;
  std::optional<ActivityClass> UserClass(trace::StringId name);
  // What the CPU-side rule needs to know of a range's name and domain.
  struct CpuSideName {
    bool comm = false;    // gloo:*, nccl:*, c10d::*
    bool cpu_op = false;  // domain cpu_op (or old Kineto's Operator)
  };
  CpuSideName CpuSideNameOf(const trace::SpanRow& row);

  // A range held back until the rank ends.
  struct Deferred {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    trace::LaneId lane = trace::kNoLane;
    std::optional<ActivityClass> user_class;
    CpuSideName name;
  };

  ClassifyOptions options_;
  std::vector<std::string> step_names_;
  const trace::StreamHeader* header_ = nullptr;
  bool device_activity_ = false;
  std::vector<Deferred> deferred_;
  std::vector<int8_t> kernel_class_;  // per StringId, unknown until first seen
  std::vector<int8_t> user_class_;    // per StringId: user pattern verdict
  std::vector<int8_t> step_name_;     // per StringId: 1 a step name, 0 not
  std::vector<int8_t> comm_name_;     // per StringId: 1 gloo:/nccl:/c10d::, 0 not
  std::vector<int8_t> cpu_op_domain_;  // per StringId: 1 a CPU operator domain, 0 not
  std::unordered_map<uint64_t, int8_t> category_class_;  // (domain << 32 | category)
};

}  // namespace rankscope::analyzer
