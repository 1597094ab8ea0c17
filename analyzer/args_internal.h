// Internal: reading the JSON args of an NVTX range (payloads, Kineto args) where the analyzer
// and the viewer's event stream need a field of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace rankscope::analyzer {

using Json = nlohmann::json;

// The args as an object; null when they are empty or not a JSON object.
inline Json ParseObject(const std::string& text) {
  if (text.empty() || text.front() != '{') return Json();
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : Json();
}

// An integer field of `object` that fits int64; nullopt otherwise.
inline std::optional<int64_t> IntField(const Json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto found = object.find(key);
  if (found == object.end()) return std::nullopt;
  if (found->is_number_unsigned()) {
    const uint64_t value = found->get<uint64_t>();
    if (value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(value);
  }
  if (found->is_number_integer()) return found->get<int64_t>();
  return std::nullopt;
}

}  // namespace rankscope::analyzer
