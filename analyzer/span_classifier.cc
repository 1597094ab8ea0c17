#include "analyzer/span_classifier.h"

#include "analyzer/classify_internal.h"

namespace rankscope::analyzer {
namespace {

constexpr int8_t kUnknown = -2;
constexpr int8_t kNoClass = -1;

}  // namespace

SpanClassifier::SpanClassifier(ClassifyOptions options) : options_(std::move(options)) {}

void SpanClassifier::Reset(const trace::StreamHeader* header) {
  header_ = header;
  const size_t strings = header_ != nullptr ? header_->strings.size() : 0;
  kernel_class_.assign(strings, kUnknown);
  user_class_.assign(strings, kUnknown);
  category_class_.clear();
}

const std::string& SpanClassifier::Str(trace::StringId id) const {
  static const std::string kEmpty;
  return header_ != nullptr && id < header_->strings.size() ? header_->strings[id] : kEmpty;
}

ActivityClass SpanClassifier::KernelClass(trace::StringId name) {
  if (name >= kernel_class_.size()) return ClassifyKernelName(Str(name), options_);
  int8_t& cached = kernel_class_[name];
  if (cached == kUnknown) cached = static_cast<int8_t>(ClassifyKernelName(Str(name), options_));
  return static_cast<ActivityClass>(cached);
}

std::optional<ActivityClass> SpanClassifier::RangeClass(const trace::SpanRow& row) {
  // The category's name first ("compute"/"comm" in any domain), then the lane's role.
  int8_t activity_class = kNoClass;
  if (row.category != 0 && header_ != nullptr) {
    const uint64_t key = (uint64_t{row.domain} << 32) | row.category;
    auto [it, inserted] = category_class_.try_emplace(key, kNoClass);
    if (inserted) {
      if (auto found = CategoryClassByName(header_->meta.entries, Str(row.domain), row.category)) {
        it->second = static_cast<int8_t>(*found);
      }
    }
    activity_class = it->second;
  }
  if (activity_class == kNoClass && header_ != nullptr && row.lane >= 1 && row.lane <= header_->lanes.size()) {
    if (auto role = RoleClassOf(header_->lanes[row.lane - 1].role)) activity_class = static_cast<int8_t>(*role);
  }
  if (activity_class == kNoClass) return std::nullopt;  // an annotation
  // User patterns re-class device work only, never annotations.
  auto user_verdict = [&]() -> int8_t {
    std::optional<ActivityClass> user = UserPatternClass(Str(row.name), options_);
    return user ? static_cast<int8_t>(*user) : kNoClass;
  };
  int8_t user = kNoClass;
  if (row.name < user_class_.size()) {
    int8_t& cached = user_class_[row.name];
    if (cached == kUnknown) cached = user_verdict();
    user = cached;
  } else {
    user = user_verdict();
  }
  return static_cast<ActivityClass>(user != kNoClass ? user : activity_class);
}

EventClass SpanClassifier::Classify(trace::SpanTable table, const trace::SpanRow& row) {
  switch (table) {
    case trace::SpanTable::kKernels: return ToEventClass(KernelClass(row.name));
    case trace::SpanTable::kMemcpys:
    case trace::SpanTable::kMemsets: return EventClass::kMemory;
    case trace::SpanTable::kNvtxRanges: {
      const std::optional<ActivityClass> device_class = RangeClass(row);
      return device_class ? ToEventClass(*device_class) : EventClass::kAnnotation;
    }
    case trace::SpanTable::kApiCalls: return EventClass::kApiCall;
    case trace::SpanTable::kSyncs: return EventClass::kSync;
  }
  return EventClass::kAnnotation;
}

}  // namespace rankscope::analyzer
