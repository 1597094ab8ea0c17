// ComparableRun to and from JSON (docs/report-json.md, "comparable"). The reader never
// throws: every value is type-checked, and a damaged file is one error line.
#include "compare/comparable_json.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace rankscope::compare {

using analyzer::kReportFormat;
using analyzer::kReportVersion;
namespace {

using Json = nlohmann::ordered_json;

Json Number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

Json OptionalInt(const std::optional<int64_t>& value) { return value ? Json(*value) : Json(nullptr); }

// Reads typed values out of one JSON object, collecting the first error with its path.
class Fields {
 public:
  Fields(const Json& object, std::string path, Status* error) : object_(object), path_(std::move(path)), error_(error) {}

  const Json* Get(const char* key, bool required) {
    if (!error_->ok()) return nullptr;
    if (!object_.is_object()) {
      Fail(fmt::format("{} is not an object", path_));
      return nullptr;
    }
    const auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) {
      if (required) Fail(fmt::format("{}.{} is missing", path_, key));
      return nullptr;
    }
    return &*it;
  }

  std::string String(const char* key) {
    const Json* value = Get(key, false);
    if (value == nullptr) return "";
    if (!value->is_string()) {
      Fail(fmt::format("{}.{} is not a string", path_, key));
      return "";
    }
    return value->get<std::string>();
  }

  std::optional<int64_t> OptionalInteger(const char* key) {
    const Json* value = Get(key, false);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number_integer()) {
      Fail(fmt::format("{}.{} is not an integer", path_, key));
      return std::nullopt;
    }
    return value->get<int64_t>();
  }

  std::optional<double> OptionalDouble(const char* key) {
    const Json* value = Get(key, false);
    if (value == nullptr) return std::nullopt;
    if (!value->is_number()) {
      Fail(fmt::format("{}.{} is not a number", path_, key));
      return std::nullopt;
    }
    return value->get<double>();
  }

  const Json* Array(const char* key, bool required) {
    const Json* value = Get(key, required);
    if (value != nullptr && !value->is_array()) {
      Fail(fmt::format("{}.{} is not an array", path_, key));
      return nullptr;
    }
    return value;
  }

  void Fail(std::string message) {
    if (error_->ok()) *error_ = Corrupt(std::move(message));
  }

 private:
  const Json& object_;
  std::string path_;
  Status* error_;
};

ComparableRun RunFromJson(const Json& object, const std::string& path, Status* error) {
  ComparableRun run;
  Fields fields(object, path, error);
  run.source = fields.String("source");
  run.command = fields.String("command");
  run.steps = fields.OptionalInteger("steps").value_or(0);
  run.allreduce_bytes_per_step = fields.OptionalDouble("allreduce_bytes_per_step");
  // Reports written before the strategies were told apart lack these: DDP's S then.
  run.model_bytes_per_step = object.contains("model_bytes_per_step") ? fields.OptionalDouble("model_bytes_per_step")
                                                                     : run.allreduce_bytes_per_step;
  if (const Json* workload = fields.Get("workload", true)) {
    Fields w(*workload, path + ".workload", error);
    run.workload.program = w.String("program");
    run.workload.backend = w.String("backend");
    run.workload.world_size = static_cast<int>(w.OptionalInteger("world_size").value_or(0));
    run.workload.batch_per_rank = w.OptionalInteger("batch_per_rank");
    run.workload.accumulation = w.OptionalInteger("accumulation");
    run.workload.global_batch = w.OptionalInteger("global_batch");
    run.workload.parameters = w.OptionalInteger("parameters");
    if (workload->contains("strategy")) run.workload.strategy = w.String("strategy");
    if (workload->contains("stages")) run.workload.stages = w.OptionalInteger("stages");
    if (workload->contains("micro_batches")) run.workload.micro_batches = w.OptionalInteger("micro_batches");
    if (error->ok() && run.workload.world_size <= 0) w.Fail(fmt::format("{}.workload.world_size is missing", path));
  }
  if (const Json* metrics = fields.Array("metrics", true)) {
    for (size_t i = 0; i < metrics->size() && error->ok(); ++i) {
      const std::string at = fmt::format("{}.metrics[{}]", path, i);
      Fields m((*metrics)[i], at, error);
      ComparableMetric metric;
      metric.name = m.String("name");
      const std::optional<double> value = m.OptionalDouble("value");
      if (const Json* samples = m.Array("samples", false)) {
        for (const Json& sample : *samples) {
          if (!sample.is_number()) {
            m.Fail(at + ".samples holds a value that is not a number");
            break;
          }
          metric.samples.push_back(sample.get<double>());
        }
      }
      // Unknown metrics (from a newer rankscope) and unknown values are skipped, not errors.
      if (value && FindMetricInfo(metric.name) != nullptr) {
        metric.value = *value;
        run.metrics.push_back(std::move(metric));
      }
    }
  }
  return run;
}

}  // namespace

Json ComparableRunToJson(const ComparableRun& run) {
  Json workload = Json::object();
  workload["program"] = run.workload.program;
  workload["backend"] = run.workload.backend;
  workload["world_size"] = run.workload.world_size;
  workload["batch_per_rank"] = OptionalInt(run.workload.batch_per_rank);
  workload["accumulation"] = OptionalInt(run.workload.accumulation);
  workload["global_batch"] = OptionalInt(run.workload.global_batch);
  workload["parameters"] = OptionalInt(run.workload.parameters);
  workload["strategy"] = run.workload.strategy;
  workload["stages"] = OptionalInt(run.workload.stages);
  workload["micro_batches"] = OptionalInt(run.workload.micro_batches);
  Json metrics = Json::array();
  for (const ComparableMetric& metric : run.metrics) {
    Json samples = Json::array();
    for (const double sample : metric.samples) samples.push_back(Number(sample));
    Json entry = Json::object();
    entry["name"] = metric.name;
    entry["value"] = Number(metric.value);
    const MetricInfo* info = FindMetricInfo(metric.name);
    entry["higher_is_better"] = info != nullptr && info->higher_is_better;
    entry["samples"] = std::move(samples);
    metrics.push_back(std::move(entry));
  }
  Json object = Json::object();
  object["source"] = run.source;
  object["command"] = run.command;
  object["workload"] = std::move(workload);
  object["steps"] = run.steps;
  object["allreduce_bytes_per_step"] =
      run.allreduce_bytes_per_step ? Number(*run.allreduce_bytes_per_step) : Json(nullptr);
  object["model_bytes_per_step"] = run.model_bytes_per_step ? Number(*run.model_bytes_per_step) : Json(nullptr);
  object["metrics"] = std::move(metrics);
  return object;
}

Result<ComparableSet> ParseComparableJson(std::string_view text, const std::string& source) {
  const Json document = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return Corrupt(fmt::format("{}: not a JSON file", source));
  if (!document.is_object()) return Corrupt(fmt::format("{}: not a rankscope JSON report", source));
  Status error;
  Fields top(document, "report", &error);
  const std::string format = top.String("format");
  const std::optional<int64_t> version = top.OptionalInteger("version");
  if (!error.ok()) return error.WithContext(source);
  const bool is_report = format == kReportFormat;
  const bool is_scaling = format == kScalingFormat;
  if (!is_report && !is_scaling) {
    return Corrupt(fmt::format("{}: not a rankscope JSON report (format '{}'; expected '{}' or '{}')", source,
                               format, kReportFormat, kScalingFormat));
  }
  const int expected = is_report ? kReportVersion : kScalingReportVersion;
  if (!version || *version != expected) {
    return Unsupported(fmt::format("{}: {} version {}, but this rankscope reads version {}; re-create it with "
                                   "this rankscope",
                                   source, format, version ? std::to_string(*version) : "missing", expected));
  }
  ComparableSet set;
  set.source = source;
  set.sweep = is_scaling;
  if (is_report) {
    const Json* comparable = top.Get("comparable", false);
    if (comparable == nullptr) {
      return Unsupported(fmt::format("{}: the report has no 'comparable' figures (written by a rankscope before "
                                     "compare existed); re-run rankscope analyze --format json",
                                     source));
    }
    set.runs.push_back(RunFromJson(*comparable, "comparable", &error));
  } else if (const Json* runs = top.Array("runs", true)) {
    for (size_t i = 0; i < runs->size() && error.ok(); ++i) {
      set.runs.push_back(RunFromJson((*runs)[i], fmt::format("runs[{}]", i), &error));
    }
  }
  if (!error.ok()) return error.WithContext(source);
  if (set.runs.empty()) return Corrupt(fmt::format("{}: the report holds no runs", source));
  for (size_t i = 1; i < set.runs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (set.runs[i].workload.world_size == set.runs[j].workload.world_size) {
        return Corrupt(fmt::format("{}: two runs of {} ranks", source, set.runs[i].workload.world_size));
      }
    }
  }
  // rankscope writes runs by world size; a hand-edited file may not.
  SortByWorldSize(set);
  return set;
}

}  // namespace rankscope::compare
