#include "analyzer/span_classifier.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "analyzer/args_internal.h"
#include "analyzer/classify_internal.h"

namespace rankscope::analyzer {
namespace {

constexpr int8_t kUnknown = -2;
constexpr int8_t kNoClass = -1;

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// The names PyTorch's process groups and c10d ops give their ranges (§1, CPU-side rule).
bool IsCommName(std::string_view name) {
  return name.starts_with("gloo:") || name.starts_with("nccl:") || name.starts_with("c10d::");
}

// Kineto's CPU operators: category cpu_op; PyTorch 1.8's traces called it Operator.
bool IsCpuOpDomain(std::string_view domain) {
  return EqualsIgnoringCase(domain, "cpu_op") || EqualsIgnoringCase(domain, "operator");
}

// Bytes per element of a Kineto "Input type": c10's C++ type names, and ScalarType names.
uint64_t ElementBytes(std::string_view type) {
  static const std::map<std::string_view, uint64_t> kSizes = {
      {"double", 8},         {"Double", 8},         {"float", 4},          {"Float", 4},
      {"c10::Half", 2},      {"Half", 2},           {"c10::BFloat16", 2},  {"BFloat16", 2},
      {"long int", 8},       {"long", 8},           {"Long", 8},           {"int", 4},
      {"Int", 4},            {"short int", 2},      {"short", 2},          {"Short", 2},
      {"signed char", 1},    {"Char", 1},           {"unsigned char", 1},  {"Byte", 1},
      {"bool", 1},           {"Bool", 1},           {"c10::complex<float>", 8}, {"ComplexFloat", 8},
      {"c10::complex<double>", 16}, {"ComplexDouble", 16}, {"c10::Float8_e4m3fn", 1}, {"c10::Float8_e5m2", 1},
  };
  const auto found = kSizes.find(type);
  return found == kSizes.end() ? 0 : found->second;
}

// Π dims × element size of one tensor input; 0 for a scalar (no dims), an unknown type, a
// dimension that is not a non-negative integer, or a product beyond 64 bits.
uint64_t TensorBytes(const Json& dims, const Json& type) {
  if (!dims.is_array() || dims.empty() || !type.is_string()) return 0;
  uint64_t bytes = ElementBytes(type.get_ref<const std::string&>());
  if (bytes == 0) return 0;
  for (const Json& dim : dims) {
    if (!dim.is_number_unsigned()) return 0;
    if (__builtin_mul_overflow(bytes, dim.get<uint64_t>(), &bytes)) return 0;
  }
  return bytes;
}

// Looks `id` up in a per-StringId cache, deciding it once; ids beyond the table are decided
// every time (they are invalid rows, which callers skip before asking).
template <typename Decide>
int8_t Cached(std::vector<int8_t>& cache, trace::StringId id, Decide decide) {
  if (id >= cache.size()) return decide();
  int8_t& cached = cache[id];
  if (cached == kUnknown) cached = decide();
  return cached;
}

}  // namespace

bool IsIntegerPayload(uint32_t payload_kind) {
  using trace::PayloadKind;
  switch (static_cast<PayloadKind>(payload_kind)) {
    case PayloadKind::kUint64:
    case PayloadKind::kInt64:
    case PayloadKind::kUint32:
    case PayloadKind::kInt32:
      return true;
    default:
      return false;
  }
}

std::optional<int64_t> StepNumberOf(std::optional<int64_t> args_step, std::string_view name, uint32_t payload_kind,
                                    int64_t payload_int) {
  if (args_step) return args_step;
  if (std::optional<int64_t> profiler = ProfilerStepNumber(name)) return profiler;
  if (IsIntegerPayload(payload_kind)) return payload_int;
  return std::nullopt;
}

std::optional<int64_t> ProfilerStepNumber(std::string_view name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.size() <= kPrefix.size() || name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  int64_t number = 0;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(first, last, number);
  if (ec != std::errc() || end != last) return std::nullopt;
  return number;
}

namespace {

uint64_t BytesOf(const Json& args) {
  if (const auto bytes = args.find("bytes"); bytes != args.end()) {
    if (bytes->is_number_unsigned()) return bytes->get<uint64_t>();
    if (bytes->is_number_integer()) return bytes->get<int64_t>() > 0 ? bytes->get<uint64_t>() : 0;
  }
  const auto dims = args.find("Input Dims");
  const auto types = args.find("Input type");
  if (dims == args.end() || types == args.end() || !dims->is_array() || !types->is_array()) return 0;
  uint64_t total = 0;
  for (size_t i = 0; i < dims->size() && i < types->size(); ++i) {
    if (__builtin_add_overflow(total, TensorBytes((*dims)[i], (*types)[i]), &total)) return 0;
  }
  return total;
}

// A field that fits int32 and is at least -1; else -1.
int32_t RankField(const Json& args, const char* key) {
  const std::optional<int64_t> value = IntField(args, key);
  return value && *value >= -1 && *value <= INT32_MAX ? static_cast<int32_t>(*value) : -1;
}

}  // namespace

uint64_t PayloadBytes(std::string_view args_json) {
  if (args_json.empty() || args_json.front() != '{') return 0;
  const Json args = Json::parse(args_json, nullptr, /*allow_exceptions=*/false);
  return args.is_object() ? BytesOf(args) : 0;
}

CommRangeArgs ReadCommRangeArgs(std::string_view args_json) {
  CommRangeArgs out;
  if (args_json.empty() || args_json.front() != '{') return out;
  const Json args = Json::parse(args_json, nullptr, /*allow_exceptions=*/false);
  if (!args.is_object()) return out;
  out.bytes = BytesOf(args);
  if (const auto comm = args.find("comm"); comm != args.end() && comm->is_number_unsigned()) {
    out.comm = comm->get<uint64_t>();
  } else if (comm != args.end() && comm->is_number_integer() && comm->get<int64_t>() >= 0) {
    out.comm = static_cast<uint64_t>(comm->get<int64_t>());
  }
  out.comm_rank = RankField(args, "comm_rank");
  out.peer = RankField(args, "peer");
  out.label = IntField(args, "bucket").value_or(-1);
  return out;
}

SpanClassifier::SpanClassifier(ClassifyOptions options, std::vector<std::string> step_names)
    : options_(std::move(options)), step_names_(std::move(step_names)) {}

void SpanClassifier::Reset(const trace::StreamHeader* header) {
  header_ = header;
  device_activity_ = false;
  deferred_.clear();
  const size_t strings = header_ != nullptr ? header_->strings.size() : 0;
  kernel_class_.assign(strings, kUnknown);
  user_class_.assign(strings, kUnknown);
  step_name_.assign(strings, kUnknown);
  comm_name_.assign(strings, kUnknown);
  cpu_op_domain_.assign(strings, kUnknown);
  category_class_.clear();
}

void SpanClassifier::HeaderGrew() {
  const size_t strings = header_ != nullptr ? header_->strings.size() : 0;
  for (std::vector<int8_t>* cache : {&kernel_class_, &user_class_, &step_name_, &comm_name_, &cpu_op_domain_}) {
    if (cache->size() < strings) cache->resize(strings, kUnknown);
  }
  // A lane's role or a meta entry may have changed what a category means.
  category_class_.clear();
}

const std::string& SpanClassifier::Str(trace::StringId id) const {
  static const std::string kEmpty;
  return header_ != nullptr && id < header_->strings.size() ? header_->strings[id] : kEmpty;
}

bool SpanClassifier::IsStep(trace::StringId name) {
  return Cached(step_name_, name, [&]() -> int8_t {
           const std::string& text = Str(name);
           if (ProfilerStepNumber(text)) return 1;
           return std::any_of(step_names_.begin(), step_names_.end(),
                              [&](const std::string& step) { return EqualsIgnoringCase(text, step); });
         }) == 1;
}

ActivityClass SpanClassifier::KernelClass(trace::StringId name) {
  return static_cast<ActivityClass>(
      Cached(kernel_class_, name, [&] { return static_cast<int8_t>(ClassifyKernelName(Str(name), options_)); }));
}

ActivityClass SpanClassifier::DeviceRowClass(trace::SpanTable table, const trace::SpanRow& row) {
  if (row.end_ns > row.start_ns) device_activity_ = true;
  return table == trace::SpanTable::kKernels ? KernelClass(row.name) : ActivityClass::kMemory;
}

std::optional<ActivityClass> SpanClassifier::UserClass(trace::StringId name) {
  const int8_t user = Cached(user_class_, name, [&] {
    std::optional<ActivityClass> found = UserPatternClass(Str(name), options_);
    return found ? static_cast<int8_t>(*found) : kNoClass;
  });
  return user == kNoClass ? std::nullopt : std::optional(static_cast<ActivityClass>(user));
}

SpanClassifier::CpuSideName SpanClassifier::CpuSideNameOf(const trace::SpanRow& row) {
  return {Cached(comm_name_, row.name, [&]() -> int8_t { return IsCommName(Str(row.name)); }) == 1,
          Cached(cpu_op_domain_, row.domain, [&]() -> int8_t { return IsCpuOpDomain(Str(row.domain)); }) == 1};
}

RangeVerdict SpanClassifier::ClassifyRange(const trace::SpanRow& row) {
  // The category's name ("compute"/"comm" in any domain), then the lane's role.
  int8_t device_class = kNoClass;
  if (row.category != 0 && header_ != nullptr) {
    const uint64_t key = (uint64_t{row.domain} << 32) | row.category;
    auto [it, inserted] = category_class_.try_emplace(key, kNoClass);
    if (inserted) {
      if (auto found = CategoryClassByName(header_->meta.entries, Str(row.domain), row.category)) {
        it->second = static_cast<int8_t>(*found);
      }
    }
    device_class = it->second;
  }
  if (device_class == kNoClass && header_ != nullptr && row.lane >= 1 && row.lane <= header_->lanes.size()) {
    if (auto role = RoleClassOf(header_->lanes[row.lane - 1].role)) device_class = static_cast<int8_t>(*role);
  }
  // User patterns re-class any range, annotations included (comm patterns first).
  const std::optional<ActivityClass> user = UserClass(row.name);
  if (device_class != kNoClass) {
    if (row.end_ns > row.start_ns) device_activity_ = true;
    return {user ? user : std::optional(static_cast<ActivityClass>(device_class)), false};
  }
  const CpuSideName name = CpuSideNameOf(row);
  if (!device_activity_ && (name.comm || name.cpu_op)) {
    deferred_.push_back({row.start_ns, row.end_ns, row.lane, user, name});
    return {std::nullopt, true};
  }
  return {user, false};
}

std::vector<std::optional<ActivityClass>> SpanClassifier::ResolveDeferred() {
  std::vector<std::optional<ActivityClass>> classes(deferred_.size());
  const bool rule = CpuSideRuleApplies();
  // The outermost CPU operators of each thread: sorted by lane, then start (the longer one
  // first), an operator that starts before the end of the last outermost one is inside it.
  std::vector<bool> outermost(deferred_.size(), false);
  if (rule) {
    std::vector<size_t> ops;
    for (size_t i = 0; i < deferred_.size(); ++i) {
      if (deferred_[i].name.cpu_op) ops.push_back(i);
    }
    std::stable_sort(ops.begin(), ops.end(), [&](size_t a, size_t b) {
      const Deferred& x = deferred_[a];
      const Deferred& y = deferred_[b];
      if (x.lane != y.lane) return x.lane < y.lane;
      return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.end_ns > y.end_ns;
    });
    trace::LaneId lane = trace::kNoLane;
    int64_t outer_end = INT64_MIN;
    for (size_t i : ops) {
      const Deferred& op = deferred_[i];
      if (op.lane != lane || op.start_ns >= outer_end) {
        outermost[i] = true;
        lane = op.lane;
        outer_end = op.end_ns;
      }
    }
  }
  for (size_t i = 0; i < deferred_.size(); ++i) {
    const Deferred& range = deferred_[i];
    if (range.user_class) {
      classes[i] = range.user_class;
    } else if (rule && range.name.comm) {
      classes[i] = ActivityClass::kComm;
    } else if (rule && outermost[i]) {
      classes[i] = ActivityClass::kCompute;
    }
  }
  std::vector<Deferred>().swap(deferred_);
  return classes;
}

}  // namespace rankscope::analyzer
