// Kineto (PyTorch profiler) JSON traces in: one rank per file (hta.md §4 describes the format).
//
// simdjson On-Demand walks the text twice without building a tree: once over the top-level
// fields (distributedInfo and baseTimeNanoseconds may come after traceEvents), then over
// traceEvents, converting each event straight into the rank file's tables. Strings are
// looked up in local caches, so an event costs no allocation beyond its rows.
//
// Mapping (ph X unless said):
//   kernel / Kernel                 -> kernels, on GPU-stream lanes
//   gpu_memcpy / Memcpy             -> memcpys (kinds parsed from "Memcpy HtoD (Pinned -> Device)")
//   gpu_memset / Memset             -> memsets
//   cuda_runtime / Runtime          -> api_calls (runtime), on CPU-thread lanes
//   cuda_driver                     -> api_calls (driver)
//   cuda_sync                       -> syncs, on the GPU-stream lane (stream 4294967295: none)
//   cpu_op, user_annotation,
//   python_function, Operator       -> push/pop NVTX ranges on their thread, domain = category;
//                                      annotations keep their args, ops only the args that size
//                                      their data (SizeArgKey: "Input Dims", "Input type", ...)
//   no cat, pid "CPU functions"     -> the older format (PyTorch without Kineto: a bare array,
//                                      ts from the profiler's start): push/pop NVTX ranges on
//                                      their thread, domain cpu_op (ProfilerStep#N:
//                                      user_annotation, as Kineto writes it)
//   gpu_user_annotation             -> NVTX ranges on the GPU-stream lane
//   ph i / I                        -> NVTX marks
//   ph i named [memory]             -> counter samples (profile_memory=True: the allocator's
//                                      totals after each allocation or free): lanes
//                                      "pytorch allocated memory: cuda:0" (args "Total
//                                      Allocated", else the running sum of "Bytes") and
//                                      "pytorch reserved memory: cuda:0" ("Total Reserved")
//   ph M thread_name / process_name -> lane names
//   ph s / f of ac2g (async_cpu_to_gpu in older traces)
//                                   -> the correlation id of a launch call or device event that
//                                      has no args.correlation: the flow's id, matched by pid,
//                                      tid and ts (s at the call, f at the kernel, copy or set)
// Everything else (the "Trace" span, counters, other categories) is counted and named in one
// note. An event of an imported category that is damaged (a field it needs missing, of the
// wrong type, negative or out of range), or an entry of traceEvents that is not an object, is
// left out and counted (import_internal.h, DamagedEvents); only JSON that is not JSON, or a
// file that is not a trace, fails.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "interop/import_internal.h"
#include "interop/inflate.h"
#include "interop/json_pieces.h"
#include "base/text.h"
#include "trace/schema.h"

namespace rankscope::interop::import {
namespace {

namespace fs = std::filesystem;
namespace od = simdjson::ondemand;
using simdjson::error_code;

static_assert(kMaxJsonBytes == simdjson::SIMDJSON_MAXSIZE_BYTES, "ReadMaybeGzip stops at what the parser takes");

__extension__ using Uint128 = unsigned __int128;

// Kineto writes CUPTI's "no stream" (uint32 -1) for context and device synchronisations.
constexpr int64_t kNoStream = 4294967295;
// Read in pieces, a trace may be of any size this side of damage.
constexpr uint64_t kMaxStreamedBytes = uint64_t{1} << 46;
// Events converted between two looks at the batch size.
constexpr uint64_t kFlushEvery = 1024;
// The pid of every event of the older format (PyTorch without Kineto).
constexpr std::string_view kCpuFunctionsPid = "CPU functions";
// The instant event PyTorch's profiler writes for each allocation and free (profile_memory),
// and its "Device Type" values (c10::DeviceType) that name devices of their own.
constexpr std::string_view kMemoryEventName = "[memory]";
constexpr int64_t kCpuDeviceType = 0;
constexpr int64_t kCudaDeviceType = 1;

// ---- numbers, exactly, from their JSON text ---------------------------------------------------

// A JSON number as sign · digits · 10^exponent.
struct Decimal {
  bool negative = false;
  Uint128 digits = 0;
  int64_t exponent = 0;  // a 4 GB token cannot take it past ±2^33
};

constexpr int kMaxDigits = 38;  // 10^38 < 2^128

Uint128 Pow10(int n) {
  Uint128 p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The number a raw JSON token holds (whitespace may follow it); nullopt when the token is
// not a JSON number or has more than 38 significant integer digits. Fraction digits past
// the 38th are dropped.
std::optional<Decimal> ParseDecimal(std::string_view text) {
  Decimal d;
  size_t i = 0;
  const size_t n = text.size();
  auto is_digit = [&](size_t at) { return at < n && text[at] >= '0' && text[at] <= '9'; };
  if (i < n && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  if (!is_digit(i)) return std::nullopt;
  int significant = 0;
  for (; is_digit(i); ++i) {
    const unsigned digit = static_cast<unsigned>(text[i] - '0');
    if (significant == 0 && digit == 0) continue;
    if (significant == kMaxDigits) return std::nullopt;
    d.digits = d.digits * 10 + digit;
    ++significant;
  }
  if (i < n && text[i] == '.') {
    ++i;
    if (!is_digit(i)) return std::nullopt;
    for (; is_digit(i); ++i) {
      const unsigned digit = static_cast<unsigned>(text[i] - '0');
      if (significant == 0 && digit == 0) {
        --d.exponent;
        continue;
      }
      if (significant == kMaxDigits) continue;
      d.digits = d.digits * 10 + digit;
      ++significant;
      --d.exponent;
    }
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative_exponent = false;
    if (i < n && (text[i] == '+' || text[i] == '-')) negative_exponent = text[i++] == '-';
    if (!is_digit(i)) return std::nullopt;
    int64_t exponent = 0;
    for (; is_digit(i); ++i) exponent = std::min<int64_t>(exponent * 10 + (text[i] - '0'), 100000);
    d.exponent += negative_exponent ? -exponent : exponent;
  }
  for (; i < n; ++i) {
    if (!IsJsonSpace(text[i])) return std::nullopt;
  }
  return d;
}

// d · 10^scale, rounded to the nearest integer (halves away from zero); nullopt when that
// does not fit in int64, or when `exact` and it is not an integer.
// Microseconds as Kineto writes them ("4458676522690.655", "1695835572943623", at most
// three decimals and 15 integer digits) in nanoseconds, in 64 bits; nullopt for any other
// form, which MicrosToNanos reads exactly. This runs twice for every event.
std::optional<int64_t> CommonMicrosToNanos(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  const bool negative = n > 0 && text[0] == '-';
  if (negative) ++i;
  uint64_t whole = 0;
  const size_t first = i;
  for (; i < n && text[i] >= '0' && text[i] <= '9'; ++i) whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
  if (i == first || i - first > 15) return std::nullopt;
  uint64_t fraction = 0;
  int decimals = 0;
  if (i < n && text[i] == '.') {
    ++i;
    for (; i < n && text[i] >= '0' && text[i] <= '9'; ++i, ++decimals) {
      if (decimals == 3) return std::nullopt;
      fraction = fraction * 10 + static_cast<unsigned>(text[i] - '0');
    }
    if (decimals == 0) return std::nullopt;
  }
  for (; i < n; ++i) {
    if (!IsJsonSpace(text[i])) return std::nullopt;  // an exponent, or not a number
  }
  for (int k = decimals; k < 3; ++k) fraction *= 10;
  const auto nanos = static_cast<int64_t>(whole * 1000 + fraction);
  return negative ? -nanos : nanos;
}

std::optional<int64_t> Scaled(const Decimal& d, int scale, bool exact) {
  if (d.digits == 0) return 0;
  const int64_t e = d.exponent + scale;
  Uint128 v = d.digits;
  const Uint128 limit = Uint128{1} << 63;  // |INT64_MIN|
  if (e >= 0) {
    for (int64_t k = 0; k < e; ++k) {
      if (v > limit / 10) return std::nullopt;
      v *= 10;
    }
  } else if (-e > kMaxDigits) {
    if (exact) return std::nullopt;
    v = 0;  // below 10^38 · 10^-39: less than a tenth
  } else {
    const Uint128 p = Pow10(static_cast<int>(-e));
    const Uint128 rest = v % p;
    if (exact && rest != 0) return std::nullopt;
    v /= p;
    if (rest >= p - rest) ++v;
  }
  if (d.negative) {
    if (v > limit) return std::nullopt;
    return v == limit ? INT64_MIN : -static_cast<int64_t>(v);
  }
  if (v >= limit) return std::nullopt;
  return static_cast<int64_t>(v);
}

// A JSON number of microseconds in whole nanoseconds, rounded half away from zero.
std::optional<int64_t> MicrosToNanos(std::string_view text) {
  if (std::optional<int64_t> common = CommonMicrosToNanos(text)) return common;
  const std::optional<Decimal> d = ParseDecimal(text);
  return d ? Scaled(*d, 3, /*exact=*/false) : std::nullopt;
}

std::optional<int64_t> IntegerFromText(std::string_view text) {
  // Ids and counts as written nearly always: at most 18 plain digits, in 64 bits.
  size_t i = text.starts_with('-') ? 1 : 0;
  const size_t first = i;
  uint64_t value = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) value = value * 10 + static_cast<unsigned>(text[i] - '0');
  if (i > first && i - first <= 18 && (i == text.size() || IsJsonSpace(text[i]))) {
    while (i < text.size() && IsJsonSpace(text[i])) ++i;
    if (i == text.size()) return first == 1 ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
  }
  const std::optional<Decimal> d = ParseDecimal(text);
  return d ? Scaled(*d, 0, /*exact=*/true) : std::nullopt;
}

// An id written as a string: "23803", or a stream as old traces write it: "stream 16".
std::optional<int64_t> IdFromString(std::string_view text) {
  while (!text.empty() && IsJsonSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsJsonSpace(text.back())) text.remove_suffix(1);
  if (text.starts_with("stream ")) text.remove_prefix(7);
  if (text.empty() || text.find_first_of(".eE") != std::string_view::npos) return std::nullopt;
  return IntegerFromText(text);
}

// ---- what the names say ---------------------------------------------------------------------

enum class Category : uint8_t {
  kOther,
  kKernel,
  kMemcpy,
  kMemset,
  kRuntime,
  kDriver,
  kSync,
  kCpuRange,
  kGpuRange,
};

Category CategoryOf(std::string_view cat) {
  static const std::pair<std::string_view, Category> kCategories[] = {
      {"kernel", Category::kKernel},
      {"cpu_op", Category::kCpuRange},
      {"cuda_runtime", Category::kRuntime},
      {"gpu_memcpy", Category::kMemcpy},
      {"gpu_memset", Category::kMemset},
      {"user_annotation", Category::kCpuRange},
      {"python_function", Category::kCpuRange},
      {"cuda_driver", Category::kDriver},
      {"cuda_sync", Category::kSync},
      {"gpu_user_annotation", Category::kGpuRange},
      {"Kernel", Category::kKernel},
      {"Runtime", Category::kRuntime},
      {"Memcpy", Category::kMemcpy},
      {"Memset", Category::kMemset},
      {"Operator", Category::kCpuRange},
  };
  for (const auto& [name, category] : kCategories) {
    if (cat == name) return category;
  }
  return Category::kOther;
}

trace::MemoryKind MemoryKindFromName(std::string_view name) {
  using trace::MemoryKind;
  static const std::pair<std::string_view, MemoryKind> kKinds[] = {
      {"Pageable", MemoryKind::kPageable},          {"Pinned", MemoryKind::kPinned},
      {"Device", MemoryKind::kDevice},              {"Array", MemoryKind::kArray},
      {"Managed", MemoryKind::kManaged},            {"Device Static", MemoryKind::kDeviceStatic},
      {"Managed Static", MemoryKind::kManagedStatic},
  };
  for (const auto& [text, kind] : kKinds) {
    if (name == text) return kind;
  }
  return MemoryKind::kUnknown;
}

trace::CopyKind CopyKindFromName(std::string_view name) {
  using trace::CopyKind;
  static const std::pair<std::string_view, CopyKind> kKinds[] = {
      {"HtoD", CopyKind::kHostToDevice},   {"DtoH", CopyKind::kDeviceToHost},  {"HtoA", CopyKind::kHostToArray},
      {"AtoH", CopyKind::kArrayToHost},    {"AtoA", CopyKind::kArrayToArray},  {"AtoD", CopyKind::kArrayToDevice},
      {"DtoA", CopyKind::kDeviceToArray},  {"DtoD", CopyKind::kDeviceToDevice}, {"HtoH", CopyKind::kHostToHost},
      {"PtoP", CopyKind::kPeerToPeer},
  };
  for (const auto& [text, kind] : kKinds) {
    if (name == text) return kind;
  }
  return CopyKind::kUnknown;
}

// "(Pinned -> Device)" -> {Pinned, Device}; "(Device)" -> {Device, Device}.
std::pair<trace::MemoryKind, trace::MemoryKind> MemoryKindsIn(std::string_view text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return {trace::MemoryKind::kUnknown, trace::MemoryKind::kUnknown};
  }
  const std::string_view inside = text.substr(open + 1, close - open - 1);
  const size_t arrow = inside.find(" -> ");
  if (arrow == std::string_view::npos) {
    const trace::MemoryKind kind = MemoryKindFromName(inside);
    return {kind, kind};
  }
  return {MemoryKindFromName(inside.substr(0, arrow)), MemoryKindFromName(inside.substr(arrow + 4))};
}

// "Memcpy HtoD (Pinned -> Device)": libkineto's memcpyName().
void ParseMemcpyName(std::string_view name, trace::MemcpyEvent* e) {
  constexpr std::string_view kPrefix = "Memcpy ";
  if (!name.starts_with(kPrefix)) return;
  const std::string_view rest = name.substr(kPrefix.size());
  e->copy_kind = CopyKindFromName(rest.substr(0, rest.find(' ')));
  std::tie(e->src_kind, e->dst_kind) = MemoryKindsIn(rest);
}

trace::SyncKind SyncKindFromName(std::string_view name) {
  using trace::SyncKind;
  if (name == "Stream Sync") return SyncKind::kStreamSynchronize;
  if (name == "Event Sync") return SyncKind::kEventSynchronize;
  if (name == "Context Sync") return SyncKind::kContextSynchronize;
  if (name == "Stream Wait Event") return SyncKind::kStreamWaitEvent;
  return SyncKind::kUnknown;
}

// ---- one event, as read ------------------------------------------------------------------------

// A field's value, not yet converted: a number's text, a string's (unescaped) content, or
// the first character of anything else.
struct Token {
  enum Kind : uint8_t { kAbsent, kNumber, kString, kOther };
  Kind kind = kAbsent;
  std::string_view text;

  bool present() const { return kind != kAbsent; }
};

// An integer written as a number or as a string ("23803"); nullopt for anything else.
std::optional<int64_t> IntegerOf(const Token& token) {
  if (token.kind == Token::kNumber) return IntegerFromText(token.text);
  if (token.kind == Token::kString) return IdFromString(token.text);
  return std::nullopt;
}

std::string_view TypeName(const Token& token) {
  switch (token.kind) {
    case Token::kAbsent: return "missing";
    case Token::kNumber: return "a number";
    case Token::kString: return "a string";
    case Token::kOther: break;
  }
  switch (token.text.empty() ? ' ' : token.text.front()) {
    case '{': return "an object";
    case '[': return "an array";
    case 't':
    case 'f': return "a boolean";
    case 'n': return "null";
    default: return "not a JSON value";
  }
}

// A pid or tid as a number or a string of one; nullopt otherwise.
std::optional<int64_t> AnyId(const Token& token) {
  if (token.kind == Token::kNumber) return IntegerFromText(token.text);
  if (token.kind == Token::kString) return IdFromString(token.text);
  return std::nullopt;
}

// A token as a message shows it: quoted, escaped, without the white space after it.
std::string Shown(const Token& token) {
  std::string_view text = token.text;
  while (!text.empty() && IsJsonSpace(text.back())) text.remove_suffix(1);
  return Printable(text, 40);
}

struct Dim3Field {
  bool present = false;
  bool valid = false;
  trace::Dim3 value;
};

// The args fields any importable category uses.
// The op args kept on cpu_op ranges: what says how much data an op moved (the analyzer sizes
// collectives from them). The rest (External id, Ev Idx, ...) differs on every op, and kept
// whole it would be a string of its own per op.
constexpr std::string_view kSizeArgKeys[] = {"Input Dims",    "Input type",     "Collective name",
                                             "dtype",         "In msg nelems",  "Out msg nelems",
                                             "In split size", "Out split size", "Group size"};
constexpr size_t kSizeArgCount = std::size(kSizeArgKeys);

struct Args {
  Token self;  // kind kOther with text "{" when it is an object
  bool object = false;
  std::array<std::string_view, kSizeArgCount> size;  // raw JSON of kSizeArgKeys[i], empty when absent
  Token device, stream, context, correlation, external_id, cbid, bytes, registers, shared_memory;
  Token in_device, from_device, to_device, in_context, wait_on_stream, wait_on_event, name;
  // [memory] events': "Device Type", "Device Id", "Bytes" (signed), "Total Allocated", "Total Reserved".
  Token device_type, device_id, allocation_bytes, total_allocated, total_reserved;
  Dim3Field grid, block;
  std::string_view text;  // the whole object's JSON
};

struct RawEvent {
  Token ph, cat, name, pid, tid, ts, dur, id;
  Args args;
};

// The key of an object field, without copying it when it has no escapes.
error_code KeyOf(od::field& field, std::string_view* key) {
  const char* raw = field.key().raw();
  size_t n = 0;
  while (raw[n] != '"') {
    if (raw[n] == '\\') return field.unescaped_key().get(*key);
    ++n;
  }
  *key = std::string_view(raw, n);
  return simdjson::SUCCESS;
}

// Calls on_field(key, value, stop) for each field of the object `json` holds, in order, until
// one returns an error or sets stop.
template <typename Json, typename OnField>
error_code ForEachField(Json& json, OnField&& on_field) {
  od::object object;
  if (error_code e = json.get_object().get(object)) return e;
  for (auto item : object) {
    od::field field;
    if (error_code e = std::move(item).get(field)) return e;
    std::string_view key;
    if (error_code e = KeyOf(field, &key)) return e;
    bool stop = false;
    if (error_code e = on_field(key, field.value(), stop)) return e;
    if (stop) break;
  }
  return simdjson::SUCCESS;
}

error_code ReadToken(od::value& value, Token* out) {
  const std::string_view raw = value.raw_json_token();
  const char first = raw.empty() ? ' ' : raw.front();
  if (first == '"') {
    out->kind = Token::kString;
    return value.get_string().get(out->text);
  }
  out->kind = first == '-' || (first >= '0' && first <= '9') ? Token::kNumber : Token::kOther;
  out->text = raw;
  return simdjson::SUCCESS;
}

error_code ReadDim3(od::value& value, Dim3Field* out) {
  out->present = true;
  const std::string_view raw = value.raw_json_token();
  if (raw.empty() || raw.front() != '[') return simdjson::SUCCESS;
  od::array array;
  if (error_code e = value.get_array().get(array)) return e;
  std::array<uint32_t, 3> xyz{};
  size_t count = 0;
  bool valid = true;
  for (auto element : array) {
    od::value item;
    if (error_code e = std::move(element).get(item)) return e;
    Token token;
    if (error_code e = ReadToken(item, &token)) return e;
    const std::optional<int64_t> number = token.kind == Token::kNumber ? IntegerFromText(token.text) : std::nullopt;
    if (!number || *number < 0 || *number > UINT32_MAX || count >= xyz.size()) {
      valid = false;
    } else {
      xyz[count] = static_cast<uint32_t>(*number);
    }
    ++count;
  }
  out->valid = valid && count == xyz.size();
  out->value = {xyz[0], xyz[1], xyz[2]};
  return simdjson::SUCCESS;
}

// A value's raw JSON text: a whole array or object, or a scalar's token.
error_code ReadRawValue(od::value& value, std::string_view* out) {
  const std::string_view token = value.raw_json_token();
  const char first = token.empty() ? ' ' : token.front();
  if (first == '[') {
    od::array array;
    if (error_code e = value.get_array().get(array)) return e;
    return array.raw_json().get(*out);
  }
  if (first == '{') {
    od::object object;
    if (error_code e = value.get_object().get(object)) return e;
    return object.raw_json().get(*out);
  }
  *out = token;
  return simdjson::SUCCESS;
}

error_code ReadArgs(od::value& value, Args* args) {
  if (error_code e = ReadToken(value, &args->self)) return e;
  if (args->self.kind != Token::kOther || args->self.text.empty() || args->self.text.front() != '{') {
    return simdjson::SUCCESS;
  }
  args->object = true;
  const char* begin = args->self.text.data();
  const auto read_field = [args](std::string_view key, od::value& field, bool&) -> error_code {
    Token* slot = nullptr;
    switch (key.size()) {
      case 4:
        if (key == "name") slot = &args->name;
        else if (key == "cbid") slot = &args->cbid;
        else if (key == "grid") {
          if (error_code e = ReadDim3(field, &args->grid)) return e;
        }
        break;
      case 5:
        if (key == "bytes") slot = &args->bytes;
        else if (key == "block") {
          if (error_code e = ReadDim3(field, &args->block)) return e;
        } else if (key == "Bytes") slot = &args->allocation_bytes;
        break;
      case 6:
        if (key == "device") slot = &args->device;
        else if (key == "stream") slot = &args->stream;
        break;
      case 7:
        if (key == "context") slot = &args->context;
        break;
      case 8:
        if (key == "inDevice") slot = &args->in_device;
        else if (key == "toDevice") slot = &args->to_device;
        break;
      case 9:
        if (key == "inContext") slot = &args->in_context;
        else if (key == "Device Id") slot = &args->device_id;
        break;
      case 10:
        if (key == "fromDevice") slot = &args->from_device;
        break;
      case 11:
        if (key == "correlation") slot = &args->correlation;
        else if (key == "External id" || key == "external id") slot = &args->external_id;
        else if (key == "Device Type") slot = &args->device_type;
        break;
      case 13:
        if (key == "shared memory") slot = &args->shared_memory;
        break;
      case 14:
        if (key == "wait_on_stream") slot = &args->wait_on_stream;
        else if (key == "Total Reserved") slot = &args->total_reserved;
        break;
      case 15:
        if (key == "Total Allocated") slot = &args->total_allocated;
        break;
      case 20:
        if (key == "registers per thread") slot = &args->registers;
        break;
      case 21:
        if (key == "wait_on_cuda_event_id") slot = &args->wait_on_event;
        break;
      default: break;
    }
    if (slot != nullptr) return ReadToken(field, slot);
    for (size_t i = 0; i < kSizeArgCount; ++i) {
      if (key == kSizeArgKeys[i]) return ReadRawValue(field, &args->size[i]);
    }
    return simdjson::SUCCESS;
  };
  if (error_code e = ForEachField(value, read_field)) return e;
  // The object's text: from its '{' to the token after its '}', less the whitespace between.
  const char* end = nullptr;
  if (error_code e = value.current_location().get(end)) return e;
  std::string_view text(begin, static_cast<size_t>(end - begin));
  while (!text.empty() && text.back() != '}') text.remove_suffix(1);
  args->text = text;
  return simdjson::SUCCESS;
}

// Fills `event` from one element of traceEvents; `is_object` false when it is not an object.
error_code ReadEvent(od::value& value, RawEvent* event, bool* is_object) {
  const std::string_view raw = value.raw_json_token();
  *is_object = !raw.empty() && raw.front() == '{';
  if (!*is_object) return simdjson::SUCCESS;
  return ForEachField(value, [event](std::string_view key, od::value& field, bool&) -> error_code {
    Token* slot = nullptr;
    switch (key.size()) {
      case 2:
        if (key == "ph") slot = &event->ph;
        else if (key == "ts") slot = &event->ts;
        else if (key == "id") slot = &event->id;
        break;
      case 3:
        if (key == "cat") slot = &event->cat;
        else if (key == "pid") slot = &event->pid;
        else if (key == "tid") slot = &event->tid;
        else if (key == "dur") slot = &event->dur;
        break;
      case 4:
        if (key == "name") slot = &event->name;
        else if (key == "args") {
          if (error_code e = ReadArgs(field, &event->args)) return e;
        }
        break;
      default: break;
    }
    return slot != nullptr ? ReadToken(field, slot) : simdjson::SUCCESS;
  });
}

// ---- lanes ----------------------------------------------------------------------------------

struct LaneKey {
  trace::LaneKind kind = trace::LaneKind::kCpuThread;
  int32_t device = -1;
  uint32_t context = 0;
  uint64_t stream = 0;
  int64_t pid = 0;
  int64_t tid = 0;
  bool operator==(const LaneKey&) const = default;
};

struct LaneKeyHash {
  size_t operator()(const LaneKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.kind);
    for (uint64_t part : {static_cast<uint64_t>(k.device), uint64_t{k.context}, k.stream, static_cast<uint64_t>(k.pid),
                          static_cast<uint64_t>(k.tid)}) {
      h = (h ^ part) * 0x100000001b3ULL;
      h ^= h >> 29;
    }
    return static_cast<size_t>(h);
  }
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

// Where an event goes, as read from it; its lane is made only once the whole event is read.
struct CpuPlace {
  int64_t pid = 0;
  int64_t tid = 0;
};

struct GpuPlace {
  int32_t device = 0;
  std::optional<uint64_t> stream;  // nullopt: none (context and device synchronizations)
  std::optional<uint32_t> context;
};

// Why a damaged event is left out: the reason it is counted under, and exactly what is wrong
// with it (the note shows it for the first event of its kind).
struct Damage {
  std::string reason;
  std::string detail;
};
using Damaged = std::optional<Damage>;  // nullopt: nothing wrong

// The kind a damaged event is counted under: its category as the trace names it, among those
// imported; "memory" for [memory] instants, "instant" for the others.
std::string_view DamagedKind(const RawEvent& e) {
  const std::string_view ph = e.ph.kind == Token::kString ? e.ph.text : std::string_view();
  if (ph == "i" || ph == "I") {
    return e.name.kind == Token::kString && e.name.text == kMemoryEventName ? "memory" : "instant";
  }
  if (e.cat.kind != Token::kString) return "";
  const std::string_view cat = e.cat.text;
  return CategoryOf(cat) != Category::kOther || cat == "ac2g" || cat == "async_cpu_to_gpu" ? cat : std::string_view();
}

// ---- the importer -------------------------------------------------------------------------------

// What a thread reads whole traces with, kept from one file to the next: a 50 MB trace read
// into fresh memory (its text, and simdjson's index of it) costs more in page faults than
// its parse.
struct ReadingBuffers {
  std::string text;
  std::string compressed;
  od::parser parser;
};

ReadingBuffers& ThreadReadingBuffers() {
  thread_local ReadingBuffers buffers;
  return buffers;
}

class KinetoImporter {
 public:
  KinetoImporter(const fs::path& file, RunSink& sink, KinetoReadLimits limits)
      : file_(file), source_(Quoted(file)), sink_(sink), limits_(limits) {}

  Status Run();

 private:
  struct TopLevel {
    bool rankscope = false;
    bool has_events = false;
    Token events;  // the traceEvents value's kind
    trace::RankIdentity who;
    int64_t base_ns = 0;
  };

  Status RunInPieces();
  Status ClaimRank(TopLevel& top);
  void FinishRank();
  Status Malformed(error_code error, od::document& doc, std::optional<uint64_t> event) const;
  Status ReadTopLevel(od::document& doc, TopLevel* top);
  Status AtEnd(od::document& doc) const;
  // TAPE_ERROR when something follows the document's value.
  static error_code AtEndError(od::document& doc);
  // What it finds wrong goes to `notes` (the sink's, unless the caller may drop them).
  error_code ReadDistributedInfo(od::value& value, trace::RankIdentity* who, std::vector<std::string>* notes);
  Result<bool> ConvertInOnePass(od::parser& parser, od::document& doc);
  // Converts the array's events, numbered from `index`; the number after the last.
  Result<uint64_t> ConvertEvents(od::document& doc, od::array events, uint64_t index);
  // Adds one event to the rank file; what is wrong with it when it is damaged (the policy
  // of import_internal.h), and then nothing of it is added.
  Damaged Convert(const RawEvent& e, uint64_t index);
  // An event of the older format (no cat, pid "CPU functions"): a CPU function, on the
  // profiler's thread `tid`.
  Damaged ConvertCpuFunction(const RawEvent& e, uint64_t index);
  // A [memory] instant: samples of its device's "pytorch allocated" and "pytorch reserved"
  // counters.
  Damaged ConvertMemory(const RawEvent& e, uint64_t index);
  trace::LaneId MemoryCounterLane(std::string_view source, std::string_view category, int32_t device);

  // Field readers: nullopt when the field is usable (an optional one may be absent), else the
  // damage, which names the event.
  Damage EventDamage(const RawEvent& e, uint64_t index, std::string reason, std::string_view problem) const;
  Damaged Integer(const RawEvent& e, uint64_t index, const Token& token, std::string_view field,
                  std::optional<int64_t>* out) const;
  Damaged Id(const RawEvent& e, uint64_t index, const Token& token, std::string_view field,
             std::optional<int64_t>* out) const;
  Damaged Times(const RawEvent& e, uint64_t index, bool with_duration, trace::EventCommon* common) const;
  Damaged Correlation(const RawEvent& e, uint64_t index, const Token& token, uint64_t* out) const;
  Damaged ReadCpuPlace(const RawEvent& e, uint64_t index, CpuPlace* place) const;
  Damaged ReadGpuPlace(const RawEvent& e, uint64_t index, const Token& device_arg, const Token& context_arg,
                       GpuPlace* place) const;
  // The lanes of places read: created once the whole event has been read, so that a damaged
  // event leaves no lane behind.
  trace::LaneId CpuLane(const CpuPlace& place);
  trace::LaneId GpuLane(const GpuPlace& place);

  // Launch-to-device flows (ac2g), for events without args.correlation: such an event waits
  // aside until every flow has been read, then takes the id of the flow that ends (device
  // work) or starts (API call) at its pid, tid and ts.
  struct FlowPoint {
    int64_t pid = 0, tid = 0, ts_ns = 0;
    auto operator<=>(const FlowPoint&) const = default;
  };
  template <typename Event>
  struct AwaitingFlow {
    FlowPoint at;
    Event event;
  };
  Damaged ReadFlow(const RawEvent& e, uint64_t index, bool start);
  std::optional<FlowPoint> PointOf(const RawEvent& e, int64_t start_ns) const;
  // True when `event` has no correlation and was set aside to get one from a flow.
  template <typename Event>
  bool AwaitFlow(const RawEvent& e, const Event& event, std::vector<AwaitingFlow<Event>>* waiting);
  void CorrelateByFlows();

  trace::LaneId Lane(const LaneKey& key);
  std::string LaneName(const trace::Lane& lane) const;
  trace::StringId Intern(std::string_view text);
  trace::StringId InternArgs(std::string_view json);
  // The args of kSizeArgKeys an op has, as compact JSON (nothing when it has none).
  trace::StringId InternSizeArgs(const Args& args);
  // The rank a trace without distributedInfo has by its file name, where that names one.
  std::optional<int> RankFromFileName() const;
  void Skip(std::string_view what);
  void NameLanes();

  const fs::path& file_;
  const std::string source_;
  RunSink& sink_;
  const KinetoReadLimits limits_;
  std::string json_;
  // The text being parsed (json_, or a chunk of traceEvents) and its offset in the file.
  std::string_view text_;
  uint64_t text_offset_ = 0;
  RankFileBuilder* builder_ = nullptr;
  int64_t base_ns_ = 0;

  std::unordered_map<LaneKey, trace::LaneId, LaneKeyHash> lane_ids_;
  std::vector<trace::Lane> lanes_;  // as created, to rename once every name is known
  std::map<std::pair<int32_t, uint64_t>, uint32_t> context_of_;  // (device, stream): first context given
  LaneKey last_key_;
  trace::LaneId last_lane_ = trace::kNoLane;
  std::unordered_map<std::string, trace::StringId, StringHash, std::equal_to<>> strings_;
  std::unordered_map<std::string, trace::StringId, StringHash, std::equal_to<>> args_ids_;  // by args text as read
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names_;  // (pid, tid) of ph M
  std::map<int64_t, std::string> process_names_;
  std::map<std::string, uint64_t, std::less<>> skipped_;
  std::optional<int64_t> os_pid_;
  std::string global_lane_name_;
  std::string minified_;
  std::string size_args_;   // InternSizeArgs' JSON, reused
  uint64_t cpu_functions_read_ = 0;      // events of the older format
  uint64_t cpu_functions_imported_ = 0;  // of which ranges now
  std::vector<std::pair<FlowPoint, uint64_t>> flow_starts_, flow_ends_;  // point, flow id
  std::vector<AwaitingFlow<trace::KernelEvent>> kernels_awaiting_;
  std::vector<AwaitingFlow<trace::MemcpyEvent>> memcpys_awaiting_;
  std::vector<AwaitingFlow<trace::MemsetEvent>> memsets_awaiting_;
  std::vector<AwaitingFlow<trace::ApiCallEvent>> calls_awaiting_;
  // One device's [memory] counters: their lanes, made at their first sample, and the bytes
  // allocated, kept for traces whose events have "Bytes" but no "Total Allocated".
  struct MemoryCounters {
    trace::LaneId allocated = trace::kNoLane;
    trace::LaneId reserved = trace::kNoLane;
    int64_t allocated_bytes = 0;
  };
  std::map<std::pair<int64_t, int64_t>, MemoryCounters> memory_counters_;  // by (Device Type, Device Id)
};

Status KinetoImporter::Malformed(error_code error, od::document& doc, std::optional<uint64_t> event) const {
  // Cut short: simdjson finds it before any value, so its location would be the start.
  if (error == simdjson::INCOMPLETE_ARRAY_OR_OBJECT || error == simdjson::UNCLOSED_STRING) {
    return Corrupt(fmt::format("{}: malformed JSON: it ends early, at byte {} (a truncated file?): {}", source_,
                               text_offset_ + text_.size(), simdjson::error_message(error)));
  }
  std::string where;
  const char* location = nullptr;
  if (!doc.current_location().get(location) && location >= text_.data() && location <= text_.data() + text_.size()) {
    where = fmt::format(" at byte {}", text_offset_ + static_cast<uint64_t>(location - text_.data()));
  }
  const std::string in = event ? fmt::format(" in traceEvents[{}]", *event) : std::string();
  return Corrupt(fmt::format("{}: malformed JSON{}{}: {}", source_, in, where, simdjson::error_message(error)));
}

// Nothing may follow the top-level value.
Status KinetoImporter::AtEnd(od::document& doc) const {
  const char* location = nullptr;
  if (doc.current_location().get(location) != simdjson::SUCCESS) return Status::Ok();  // at the end
  return Corrupt(fmt::format("{}: malformed JSON at byte {}: more after the top-level value", source_,
                             text_offset_ + static_cast<uint64_t>(location - text_.data())));
}

error_code KinetoImporter::AtEndError(od::document& doc) {
  const char* location = nullptr;
  return doc.current_location().get(location) != simdjson::SUCCESS ? simdjson::SUCCESS : simdjson::TAPE_ERROR;
}

Damage KinetoImporter::EventDamage(const RawEvent& e, uint64_t index, std::string reason,
                                   std::string_view problem) const {
  // Only events of the categories imported get here: their category is one of ours.
  const bool ours = e.cat.kind == Token::kString && CategoryOf(e.cat.text) != Category::kOther;
  const std::string_view cat = ours ? e.cat.text : std::string_view("event");
  const std::string name =
      e.name.kind == Token::kString ? fmt::format(" {}", Printable(e.name.text, 60)) : std::string();
  return Damage{std::move(reason), fmt::format("traceEvents[{}] ({}{}): {}", index, cat, name, problem)};
}

Damaged KinetoImporter::Integer(const RawEvent& e, uint64_t index, const Token& token, std::string_view field,
                                std::optional<int64_t>* out) const {
  if (!token.present()) {
    *out = std::nullopt;
    return std::nullopt;
  }
  if (token.kind != Token::kNumber) {
    return EventDamage(e, index, fmt::format("without a valid {}", field),
                       fmt::format("{} is {}, not an integer", field, TypeName(token)));
  }
  *out = IntegerFromText(token.text);
  if (!*out) {
    return EventDamage(e, index, fmt::format("without a valid {}", field),
                       fmt::format("{} is not an integer: {}", field, Shown(token)));
  }
  return std::nullopt;
}

Damaged KinetoImporter::Id(const RawEvent& e, uint64_t index, const Token& token, std::string_view field,
                           std::optional<int64_t>* out) const {
  if (token.kind == Token::kString) {
    *out = IdFromString(token.text);
    if (!*out) {
      return EventDamage(e, index, fmt::format("without a valid {}", field),
                         fmt::format("{} {} is not a number", field, Shown(token)));
    }
    return std::nullopt;
  }
  return Integer(e, index, token, field, out);
}

Damaged KinetoImporter::Times(const RawEvent& e, uint64_t index, bool with_duration,
                              trace::EventCommon* common) const {
  // No string is built unless the event is damaged: this runs for every event.
  const char* const reason = with_duration ? "without a valid ts/dur" : "without a valid ts";
  if (!e.ts.present()) return EventDamage(e, index, reason, "no ts");
  if (e.ts.kind != Token::kNumber) {
    return EventDamage(e, index, reason, fmt::format("ts is {}, not a number", TypeName(e.ts)));
  }
  const std::optional<int64_t> ts_ns = MicrosToNanos(e.ts.text);
  if (!ts_ns || __builtin_add_overflow(base_ns_, *ts_ns, &common->start_ns)) {
    return EventDamage(e, index, reason, fmt::format("ts {} is not a time in microseconds", Shown(e.ts)));
  }
  common->end_ns = common->start_ns;
  if (!with_duration) return std::nullopt;
  if (!e.dur.present()) return EventDamage(e, index, reason, "no dur");
  if (e.dur.kind != Token::kNumber) {
    return EventDamage(e, index, reason, fmt::format("dur is {}, not a number", TypeName(e.dur)));
  }
  const std::optional<int64_t> dur_ns = MicrosToNanos(e.dur.text);
  if (!dur_ns || *dur_ns < 0 || __builtin_add_overflow(common->start_ns, *dur_ns, &common->end_ns)) {
    return EventDamage(e, index, reason, fmt::format("dur {} is not a duration in microseconds", Shown(e.dur)));
  }
  return std::nullopt;
}

Damaged KinetoImporter::Correlation(const RawEvent& e, uint64_t index, const Token& token, uint64_t* out) const {
  std::optional<int64_t> value;
  if (Damaged damage = Integer(e, index, token, "args.correlation", &value)) return damage;
  *out = static_cast<uint64_t>(value.value_or(0));
  return std::nullopt;
}

std::optional<KinetoImporter::FlowPoint> KinetoImporter::PointOf(const RawEvent& e, int64_t start_ns) const {
  const std::optional<int64_t> pid = AnyId(e.pid);
  const std::optional<int64_t> tid = AnyId(e.tid);
  if (!pid || !tid) return std::nullopt;
  return FlowPoint{*pid, *tid, start_ns};
}

Damaged KinetoImporter::ReadFlow(const RawEvent& e, uint64_t index, bool start) {
  trace::EventCommon at;
  if (Damaged damage = Times(e, index, /*with_duration=*/false, &at)) return damage;
  std::optional<int64_t> id;
  if (Damaged damage = Id(e, index, e.id, "id", &id)) return damage;
  const std::optional<FlowPoint> point = PointOf(e, at.start_ns);
  if (!id || *id <= 0 || !point) {
    Skip(start ? "(flow start without id, pid or tid)" : "(flow end without id, pid or tid)");
    return std::nullopt;
  }
  (start ? flow_starts_ : flow_ends_).emplace_back(*point, static_cast<uint64_t>(*id));
  return std::nullopt;
}

template <typename Event>
bool KinetoImporter::AwaitFlow(const RawEvent& e, const Event& event, std::vector<AwaitingFlow<Event>>* waiting) {
  if (event.correlation_id != 0) return false;
  const std::optional<FlowPoint> point = PointOf(e, event.start_ns);
  if (!point) return false;
  waiting->push_back({*point, event});
  return true;
}

void KinetoImporter::CorrelateByFlows() {
  const size_t waiting =
      kernels_awaiting_.size() + memcpys_awaiting_.size() + memsets_awaiting_.size() + calls_awaiting_.size();
  if (waiting == 0) return;
  for (auto* flows : {&flow_starts_, &flow_ends_}) std::sort(flows->begin(), flows->end());
  // The id of the one flow at `at`; 0 when none is, or when two flows disagree there.
  auto find = [](const std::vector<std::pair<FlowPoint, uint64_t>>& flows, const FlowPoint& at) -> uint64_t {
    auto it = std::lower_bound(flows.begin(), flows.end(), std::pair<FlowPoint, uint64_t>{at, 0});
    if (it == flows.end() || it->first != at) return 0;
    const uint64_t id = it->second;
    for (++it; it != flows.end() && it->first == at; ++it) {
      if (it->second != id) return 0;
    }
    return id;
  };
  uint64_t tied = 0;
  auto resolve = [&](auto& awaiting, const std::vector<std::pair<FlowPoint, uint64_t>>& flows, auto& table) {
    for (auto& [at, event] : awaiting) {
      event.correlation_id = find(flows, at);
      if (event.correlation_id != 0) ++tied;
      table.push_back(event);
    }
    awaiting.clear();
  };
  trace::EventTables& out = builder_->events();
  resolve(kernels_awaiting_, flow_ends_, out.kernels);
  resolve(memcpys_awaiting_, flow_ends_, out.memcpys);
  resolve(memsets_awaiting_, flow_ends_, out.memsets);
  resolve(calls_awaiting_, flow_starts_, out.api_calls);
  sink_.Note(fmt::format("{}: {} of {} event{} without args.correlation (launch calls, the device work they started) "
                         "took it from the ac2g flow at their start{}",
                         source_, tied, waiting, waiting == 1 ? "" : "s",
                         tied == waiting ? "" : "; the others have no correlation"));
}

Damaged KinetoImporter::ReadCpuPlace(const RawEvent& e, uint64_t index, CpuPlace* place) const {
  if (!e.pid.present()) return EventDamage(e, index, "without a valid pid", "no pid");
  if (!e.tid.present()) return EventDamage(e, index, "without a valid tid", "no tid");
  std::optional<int64_t> pid, tid;
  if (Damaged damage = Id(e, index, e.pid, "pid", &pid)) return damage;
  if (Damaged damage = Id(e, index, e.tid, "tid", &tid)) return damage;
  place->pid = *pid;
  place->tid = *tid;
  return std::nullopt;
}

trace::LaneId KinetoImporter::CpuLane(const CpuPlace& place) {
  if (!os_pid_) os_pid_ = place.pid;
  LaneKey key;
  key.kind = trace::LaneKind::kCpuThread;
  key.pid = place.pid;
  key.tid = place.tid;
  return Lane(key);
}

// Device: `device_arg` (args.device or its stand-in), else the event's pid; stream:
// args.stream, else the tid ("stream 16" in old traces); context: `context_arg`. A stream
// of 4294967295 or below 0 is none: such events share one lane per device and context.
Damaged KinetoImporter::ReadGpuPlace(const RawEvent& e, uint64_t index, const Token& device_arg,
                                     const Token& context_arg, GpuPlace* place) const {
  if (!e.pid.present()) return EventDamage(e, index, "without a valid pid", "no pid");
  if (!e.tid.present()) return EventDamage(e, index, "without a valid tid", "no tid");
  std::optional<int64_t> device, context, stream_id;
  if (Damaged damage = Integer(e, index, device_arg, "args.device", &device)) return damage;
  if (!device) {
    if (Damaged damage = Id(e, index, e.pid, "pid", &device)) return damage;
  }
  if (*device < 0 || *device > INT32_MAX) {
    return EventDamage(e, index, "without a valid device", fmt::format("device {} is out of range", *device));
  }
  if (Damaged damage = Integer(e, index, e.args.stream, "args.stream", &stream_id)) return damage;
  if (!stream_id) {
    if (Damaged damage = Id(e, index, e.tid, "tid", &stream_id)) return damage;
  }
  if (Damaged damage = Integer(e, index, context_arg, "args.context", &context)) return damage;
  if (context && (*context < 0 || *context > UINT32_MAX)) {
    return EventDamage(e, index, "without a valid args.context",
                       fmt::format("args.context {} is out of range", *context));
  }
  place->device = static_cast<int32_t>(*device);
  const bool no_stream = *stream_id < 0 || *stream_id == kNoStream;
  place->stream = no_stream ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(*stream_id));
  place->context = context ? std::optional<uint32_t>(static_cast<uint32_t>(*context)) : std::nullopt;
  return std::nullopt;
}

trace::LaneId KinetoImporter::GpuLane(const GpuPlace& place) {
  LaneKey key;
  key.kind = trace::LaneKind::kGpuStream;
  key.device = place.device;
  key.stream = place.stream.value_or(static_cast<uint64_t>(kNoStream));
  const std::pair<int32_t, uint64_t> device_stream{key.device, key.stream};
  if (place.context) {
    key.context = *place.context;
    context_of_.try_emplace(device_stream, key.context);
  } else if (auto known = context_of_.find(device_stream); known != context_of_.end()) {
    // No context given (old traces, GPU annotations): the stream's, from its other events.
    key.context = known->second;
  }
  return Lane(key);
}

trace::LaneId KinetoImporter::Lane(const LaneKey& key) {
  if (last_lane_ != trace::kNoLane && key == last_key_) return last_lane_;
  auto [it, added] = lane_ids_.try_emplace(key, trace::kNoLane);
  if (added) {
    trace::Lane lane;
    lane.kind = key.kind;
    lane.device = key.device;
    lane.context = key.context;
    lane.stream = key.stream;
    lane.pid = key.pid;
    lane.tid = key.tid;
    lane.name = LaneName(lane);
    it->second = builder_->Lane(lane);
    lanes_.push_back(std::move(lane));
  }
  last_key_ = key;
  last_lane_ = it->second;
  return it->second;
}

std::string KinetoImporter::LaneName(const trace::Lane& lane) const {
  auto trimmed = [](const std::string& text) {
    std::string_view view = text;
    while (!view.empty() && IsJsonSpace(view.back())) view.remove_suffix(1);
    while (!view.empty() && IsJsonSpace(view.front())) view.remove_prefix(1);
    return std::string(view);
  };
  if (lane.kind == trace::LaneKind::kGpuStream) {
    if (lane.stream == static_cast<uint64_t>(kNoStream)) return "no stream (context and device synchronization)";
    const auto named = thread_names_.find({lane.device, static_cast<int64_t>(lane.stream)});
    if (named != thread_names_.end() && !trimmed(named->second).empty()) return trimmed(named->second);
    return fmt::format("stream {}", lane.stream);
  }
  if (lane.pid == 0 && lane.tid == 0 && !global_lane_name_.empty()) return global_lane_name_;
  if (const auto named = thread_names_.find({lane.pid, lane.tid}); named != thread_names_.end()) {
    return trimmed(named->second);
  }
  if (const auto process = process_names_.find(lane.pid); process != process_names_.end()) {
    return fmt::format("{} (thread {})", trimmed(process->second), lane.tid);
  }
  return fmt::format("thread {}", lane.tid);
}

void KinetoImporter::NameLanes() {
  for (trace::Lane& lane : lanes_) {
    std::string name = LaneName(lane);
    if (name == lane.name) continue;
    lane.name = std::move(name);
    builder_->Lane(lane);
  }
}

trace::StringId KinetoImporter::Intern(std::string_view text) {
  if (text.empty()) return trace::kEmptyString;
  if (auto it = strings_.find(text); it != strings_.end()) return it->second;
  const trace::StringId id = builder_->Intern(text);
  strings_.emplace(std::string(text), id);
  return id;
}

// An args object kept as compact JSON ("{}" and nothing are nothing).
trace::StringId KinetoImporter::InternArgs(std::string_view json) {
  if (json.size() <= 2) return trace::kEmptyString;
  // Ops repeat their args text step after step: each text is minified once.
  if (auto known = args_ids_.find(json); known != args_ids_.end()) return known->second;
  minified_.resize(json.size());
  size_t length = 0;
  trace::StringId id = trace::kEmptyString;
  if (simdjson::minify(json.data(), json.size(), minified_.data(), length) != simdjson::SUCCESS) {
    id = Intern(json);
  } else if (length > 2) {
    id = Intern(std::string_view(minified_.data(), length));
  }
  args_ids_.emplace(std::string(json), id);
  return id;
}

trace::StringId KinetoImporter::InternSizeArgs(const Args& args) {
  size_args_.clear();
  for (size_t i = 0; i < kSizeArgCount; ++i) {
    if (args.size[i].empty()) continue;
    size_args_ += size_args_.empty() ? "{\"" : ",\"";
    size_args_ += kSizeArgKeys[i];
    size_args_ += "\":";
    size_args_ += args.size[i];
  }
  if (size_args_.empty()) return trace::kEmptyString;
  size_args_ += '}';
  return InternArgs(size_args_);
}

// "ddp_rank1.json", "trace-rank_1.pt.trace.json.gz", "test_worker1.json": the number after the
// last "rank" or "worker" that starts a word (after a non-letter), with an optional '-' or '_'
// between, and ends one (no letter or digit after it).
std::optional<int> KinetoImporter::RankFromFileName() const {
  const std::string name = file_.filename().string();
  std::optional<int> rank;
  for (const std::string_view word : {std::string_view("rank"), std::string_view("worker")}) {
    for (size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
      if (at > 0 && std::isalpha(static_cast<unsigned char>(name[at - 1]))) continue;
      size_t digits = at + word.size();
      if (digits < name.size() && (name[digits] == '-' || name[digits] == '_')) ++digits;
      size_t end = digits;
      while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end])) && end - digits < 7) ++end;
      if (end == digits || (end < name.size() && std::isalnum(static_cast<unsigned char>(name[end])))) continue;
      rank = std::stoi(name.substr(digits, end - digits));
    }
  }
  return rank;
}

void KinetoImporter::Skip(std::string_view what) {
  auto it = skipped_.find(what);
  if (it == skipped_.end()) it = skipped_.emplace(std::string(what), 0).first;
  ++it->second;
}

// rank, world_size and backend, where present and usable; notes what is not.
error_code KinetoImporter::ReadDistributedInfo(od::value& value, trace::RankIdentity* who,
                                               std::vector<std::string>* notes) {
  const std::string_view raw = value.raw_json_token();
  if (raw.empty() || raw.front() != '{') {
    if (!raw.starts_with("null")) notes->push_back(fmt::format("{}: distributedInfo is not an object; ignored", source_));
    return simdjson::SUCCESS;
  }
  return ForEachField(value, [&](std::string_view key, od::value& field, bool&) -> error_code {
    if (key != "rank" && key != "world_size" && key != "backend") return simdjson::SUCCESS;
    Token token;
    if (error_code e = ReadToken(field, &token)) return e;
    if (key == "backend") {
      if (token.kind == Token::kString) who->backend = std::string(token.text);
      return simdjson::SUCCESS;
    }
    const std::optional<int64_t> number = IntegerOf(token);
    if (!number || *number < 0 || *number > INT32_MAX) {
      notes->push_back(fmt::format("{}: distributedInfo.{} is {}; ignored", source_, key,
                             token.kind == Token::kOther ? std::string(TypeName(token)) : Shown(token)));
      return simdjson::SUCCESS;
    }
    (key == "rank" ? who->rank : who->world_size) = static_cast<int>(*number);
    return simdjson::SUCCESS;
  });
}

// The top-level fields, in whatever order they come.
Status KinetoImporter::ReadTopLevel(od::document& doc, TopLevel* top) {
  Status bad_base = Status::Ok();
  const auto read_field = [&](std::string_view key, od::value& field, bool& stop) -> error_code {
    if (key == "rankscope") {
      top->rankscope = true;
      stop = true;  // rankscope's own export: its importer reads the file again
      return simdjson::SUCCESS;
    }
    if (key == "traceEvents") {
      top->has_events = true;
      return ReadToken(field, &top->events);
    }
    if (key == "distributedInfo") {
      std::vector<std::string> notes;
      const error_code e = ReadDistributedInfo(field, &top->who, &notes);
      for (std::string& note : notes) sink_.Note(std::move(note));
      return e;
    }
    if (key != "baseTimeNanoseconds") return simdjson::SUCCESS;
    Token token;
    if (error_code e = ReadToken(field, &token)) return e;
    const std::optional<int64_t> base = IntegerOf(token);
    if (!base) {
      bad_base = Corrupt(fmt::format("{}: baseTimeNanoseconds is {}, not an integer", source_,
                                     token.kind == Token::kOther ? std::string(TypeName(token)) : Shown(token)));
      stop = true;
      return simdjson::SUCCESS;
    }
    top->base_ns = *base;
    return simdjson::SUCCESS;
  };
  if (error_code e = ForEachField(doc, read_field)) return Malformed(e, doc, std::nullopt);
  RS_RETURN_IF_ERROR(bad_base);
  if (top->rankscope) return Status::Ok();
  return AtEnd(doc);
}

// Where the simple pairs that end the top-level object start: `, "k": "v", "n": 12 }` after
// its last object or array value (or after its '{'). Only strings and bare literals are
// stepped over, backward; npos when the text ends otherwise.
size_t TailPairsStart(std::string_view text) {
  size_t i = text.size();
  const auto skip_space = [&] {
    while (i > 0 && IsJsonSpace(text[i - 1])) --i;
  };
  // text[i - 1] is a string's closing quote: i becomes its opening quote's index + 0.
  const auto skip_string = [&]() -> bool {
    size_t j = i - 1;
    while (j > 0) {
      const size_t quote = text.rfind('"', j - 1);
      if (quote == std::string_view::npos) return false;
      size_t backslashes = 0;
      while (quote >= backslashes + 1 && text[quote - backslashes - 1] == '\\') ++backslashes;
      if (backslashes % 2 == 0) {
        i = quote;
        return true;
      }
      j = quote;
    }
    return false;
  };
  skip_space();
  if (i == 0 || text[i - 1] != '}') return std::string_view::npos;
  --i;
  for (;;) {
    skip_space();
    if (i == 0) return std::string_view::npos;
    const char last = text[i - 1];
    if (last == ']' || last == '}' || last == '{') return i;  // after the last composite (or the '{')
    const size_t value_end = i;
    if (last == '"') {
      if (!skip_string()) return std::string_view::npos;
    } else {
      while (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '.' ||
                       text[i - 1] == '-' || text[i - 1] == '+')) {
        --i;
      }
      if (i == value_end) return std::string_view::npos;
    }
    skip_space();
    if (i == 0 || text[i - 1] != ':') return std::string_view::npos;
    --i;
    skip_space();
    if (i == 0 || text[i - 1] != '"' || !skip_string()) return std::string_view::npos;
    skip_space();
    if (i == 0) return std::string_view::npos;
    if (text[i - 1] == '{') return i;
    if (text[i - 1] != ',') return std::string_view::npos;
    --i;
  }
}

// Kineto's own layout, read in one pass: distributedInfo before traceEvents, and
// baseTimeNanoseconds before it or among the simple pairs that end the file. The events are
// then converted as the pass meets them, and the array is not walked twice. False, with
// nothing converted or noted, for any other layout: the caller reads the top level first.
Result<bool> KinetoImporter::ConvertInOnePass(od::parser& doc_parser, od::document& doc) {
  TopLevel top;
  bool base_known = false, tail_base_damaged = false;
  const size_t tail_start = TailPairsStart(json_);
  if (tail_start != std::string_view::npos) {
    // The tail as an object of its own, read as the whole top level would read it.
    std::string tail = "{" + json_.substr(tail_start);
    if (const size_t comma = tail.find_first_not_of(" \t\r\n", 1); comma != std::string::npos && tail[comma] == ',') {
      tail[comma] = ' ';
    }
    tail.reserve(tail.size() + simdjson::SIMDJSON_PADDING);
    od::parser parser;
    od::document tail_doc;
    TopLevel tail_top;
    tail_top.base_ns = INT64_MIN;
    if (!parser.iterate(tail.data(), tail.size(), tail.capacity()).get(tail_doc)) {
      const auto read_base = [&](std::string_view key, od::value& field, bool&) -> error_code {
        if (key != "baseTimeNanoseconds") return simdjson::SUCCESS;
        Token token;
        if (error_code e = ReadToken(field, &token)) return e;
        const std::optional<int64_t> base = IntegerOf(token);
        tail_top.base_ns = base.value_or(INT64_MIN);
        base_known = base.has_value();
        tail_base_damaged = !base_known;
        return simdjson::SUCCESS;
      };
      if (ForEachField(tail_doc, read_base) != simdjson::SUCCESS) base_known = false;
    }
    // A damaged base is for the whole read to name.
    if (tail_base_damaged) return false;
    if (base_known) top.base_ns = tail_top.base_ns;
  }
  const bool base_in_tail = base_known;

  bool distributed = false, converted = false, other_layout = false;
  std::vector<std::string> notes;
  Status failed = Status::Ok();
  const auto read_field = [&](std::string_view key, od::value& field, bool& stop) -> error_code {
    if (converted) return simdjson::SUCCESS;  // the rest is read again by the checks below
    if (key == "rankscope") {
      other_layout = stop = true;
      return simdjson::SUCCESS;
    }
    if (key == "distributedInfo") {
      distributed = true;
      return ReadDistributedInfo(field, &top.who, &notes);
    }
    if (key == "baseTimeNanoseconds") {
      // Before the events: it counts unless the tail holds one (the last one read wins).
      if (base_in_tail) return simdjson::SUCCESS;
      Token token;
      if (error_code e = ReadToken(field, &token)) return e;
      const std::optional<int64_t> base = IntegerOf(token);
      if (!base) {
        other_layout = stop = true;  // the whole read says what is wrong with it
        return simdjson::SUCCESS;
      }
      top.base_ns = *base;
      base_known = true;
      return simdjson::SUCCESS;
    }
    if (key != "traceEvents") return simdjson::SUCCESS;
    od::array events;
    if (!distributed || !base_known || field.get_array().get(events) != simdjson::SUCCESS) {
      other_layout = stop = true;
      return simdjson::SUCCESS;
    }
    for (std::string& note : notes) sink_.Note(std::move(note));
    notes.clear();
    failed = ClaimRank(top);
    if (failed.ok()) failed = ConvertEvents(doc, events, 0).status();
    converted = true;
    if (!failed.ok()) stop = true;
    return simdjson::SUCCESS;
  };
  const error_code e = ForEachField(doc, read_field);
  RS_RETURN_IF_ERROR(failed);
  if (!converted) {
    // After an error the document cannot rewind: it is parsed again, from the start.
    if (e != simdjson::SUCCESS) {
      if (error_code again = doc_parser.iterate(json_.data(), json_.size(), json_.capacity()).get(doc)) {
        return Malformed(again, doc, std::nullopt);
      }
    } else {
      doc.rewind();
    }
    return false;
  }
  if (e) return Malformed(e, doc, std::nullopt);
  RS_RETURN_IF_ERROR(AtEnd(doc));
  return true;
}

Status KinetoImporter::Run() {
  ReadingBuffers& buffers = ThreadReadingBuffers();
  RS_ASSIGN_OR_RETURN(const bool fits, ReadWholeInto(file_, limits_.whole_file_bytes, kJsonPadding, buffers.text,
                                                     buffers.compressed));
  if (!fits) return RunInPieces();
  // The text is this importer's while it reads, the thread's again after (its capacity kept).
  json_.swap(buffers.text);
  struct GiveBack {
    std::string& text;
    std::string& json;
    // Not cleared: the next file's read then zero-fills only what it needs beyond this size.
    ~GiveBack() { text.swap(json); }
  } give_back{buffers.text, json_};
  // A byte-order mark is not JSON, and simdjson would refuse the file for it.
  if (json_.starts_with(kUtf8ByteOrderMark)) json_.erase(0, kUtf8ByteOrderMark.size());
  if (json_.capacity() < json_.size() + simdjson::SIMDJSON_PADDING) json_.reserve(json_.size() + kJsonPadding);
  text_ = json_;
  od::parser& parser = buffers.parser;
  od::document doc;
  if (error_code e = parser.iterate(json_.data(), json_.size(), json_.capacity()).get(doc)) {
    if (e == simdjson::EMPTY) return Corrupt(fmt::format("{}: empty file: no JSON in it", source_));
    if (e == simdjson::CAPACITY) {
      return Unsupported(fmt::format("{}: {} bytes of JSON: more than the parser takes ({} bytes)", source_,
                                     json_.size(), simdjson::SIMDJSON_MAXSIZE_BYTES));
    }
    return Corrupt(fmt::format("{}: malformed JSON: {}", source_, simdjson::error_message(e)));
  }
  od::json_type type;
  if (error_code e = doc.type().get(type)) return Malformed(e, doc, std::nullopt);

  TopLevel top;
  od::array events;
  if (type == od::json_type::array) {
    // The Chrome trace format's other form: the events alone, as old profiler tests write them.
    if (error_code e = doc.get_array().get(events)) return Malformed(e, doc, std::nullopt);
  } else if (type == od::json_type::object) {
    RS_ASSIGN_OR_RETURN(const bool converted, ConvertInOnePass(parser, doc));
    if (converted) {
      FinishRank();
      return Status::Ok();
    }
    RS_RETURN_IF_ERROR(ReadTopLevel(doc, &top));
    if (top.rankscope) return ImportRankscopeChrome(file_, json_, sink_);
    if (!top.has_events) return Corrupt(fmt::format("{}: no traceEvents array: not a PyTorch profiler trace", source_));
    if (top.events.kind != Token::kOther || top.events.text.empty() || top.events.text.front() != '[') {
      return Corrupt(fmt::format("{}: traceEvents is {}, not an array", source_, TypeName(top.events)));
    }
    doc.rewind();
    od::object object;
    od::value value;
    if (error_code e = doc.get_object().get(object)) return Malformed(e, doc, std::nullopt);
    if (error_code e = object.find_field_unordered("traceEvents").get(value)) return Malformed(e, doc, std::nullopt);
    if (error_code e = value.get_array().get(events)) return Malformed(e, doc, std::nullopt);
  } else {
    return Corrupt(fmt::format("{}: the top level is not a JSON object (a {}): not a PyTorch profiler trace", source_,
                               type == od::json_type::string   ? "string"
                               : type == od::json_type::number ? "number"
                               : type == od::json_type::boolean ? "boolean"
                                                                : "null"));
  }

  RS_RETURN_IF_ERROR(ClaimRank(top));
  RS_RETURN_IF_ERROR(ConvertEvents(doc, events, 0).status());
  if (type == od::json_type::array) RS_RETURN_IF_ERROR(AtEnd(doc));
  FinishRank();
  return Status::Ok();
}

// A trace too large to hold (more than limits_.whole_file_bytes once unpacked): its top level without
// traceEvents first, then traceEvents in chunks, so memory does not grow with the file.
Status KinetoImporter::RunInPieces() {
  TopLevel top;
  TopLevelScan scan;
  {
    RS_ASSIGN_OR_RETURN(std::unique_ptr<FileBytes> bytes, FileBytes::Open(file_, kMaxStreamedBytes));
    RS_ASSIGN_OR_RETURN(scan, ScanTopLevel(*bytes, "traceEvents", source_));
  }
  od::parser parser;
  if (!scan.bare_array) {
    json_ = std::move(scan.skeleton);
    text_ = json_;
    od::document doc;
    if (error_code e = parser.iterate(json_.data(), json_.size(), json_.capacity()).get(doc)) {
      return Corrupt(fmt::format("{}: malformed JSON: {}", source_, simdjson::error_message(e)));
    }
    RS_RETURN_IF_ERROR(ReadTopLevel(doc, &top));
    if (top.rankscope) {
      return Unsupported(fmt::format("{}: a rankscope Chrome export of more than {} bytes: too large to read", source_,
                                     limits_.whole_file_bytes));
    }
    if (!top.has_events) return Corrupt(fmt::format("{}: no traceEvents array: not a PyTorch profiler trace", source_));
    if (!scan.found) return Corrupt(fmt::format("{}: traceEvents is {}, not an array", source_, TypeName(top.events)));
  }
  RS_RETURN_IF_ERROR(ClaimRank(top));
  RS_ASSIGN_OR_RETURN(std::unique_ptr<FileBytes> bytes, FileBytes::Open(file_, kMaxStreamedBytes));
  ArrayChunks chunks(*bytes, scan.array_begin, limits_.chunk_bytes, source_);
  uint64_t index = 0;
  for (;;) {
    RS_ASSIGN_OR_RETURN(std::string_view chunk, chunks.Next(simdjson::SIMDJSON_PADDING));
    if (chunk.empty()) break;
    // Malformed() places errors within the chunk, at its offset in the file.
    text_ = chunk;
    text_offset_ = chunks.chunk_offset() - 1;
    od::document doc;
    od::array events;
    if (error_code e = parser.iterate(chunk.data(), chunk.size(), chunk.size() + simdjson::SIMDJSON_PADDING).get(doc)) {
      return Corrupt(fmt::format("{}: malformed JSON in traceEvents near byte {}: {}", source_, text_offset_,
                                 simdjson::error_message(e)));
    }
    if (error_code e = doc.get_array().get(events)) return Malformed(e, doc, index);
    RS_ASSIGN_OR_RETURN(index, ConvertEvents(doc, events, index));
    if (error_code e = AtEndError(doc)) return Malformed(e, doc, index);
  }
  FinishRank();
  return Status::Ok();
}

// Which rank the trace is, claimed in the sink: its distributedInfo, else its file name.
Status KinetoImporter::ClaimRank(TopLevel& top) {
  base_ns_ = top.base_ns;
  bool rank_from_name = false;
  if (!top.who.rank) {
    const std::optional<int> named = RankFromFileName();
    const std::vector<int> taken = sink_.ranks_taken();
    if (named && std::find(taken.begin(), taken.end(), *named) == taken.end()) {
      top.who.rank = named;
      rank_from_name = true;
      sink_.Note(fmt::format("{}: no rank recorded; imported as rank {}, from its file name", source_, *named));
    }
  }
  RS_ASSIGN_OR_RETURN(builder_, sink_.Rank(top.who, source_));
  sink_.DoneClaiming();  // inputs read beside this one may claim theirs now
  if (rank_from_name) builder_->SetMeta("import.rank_source", "file name");
  return Status::Ok();
}

// After the last event: correlations from flows, lane names, the notes.
void KinetoImporter::FinishRank() {
  CorrelateByFlows();
  if (os_pid_) builder_->SetMeta(trace::meta_key::kPid, std::to_string(*os_pid_));
  NameLanes();
  builder_->Flush();
  if (cpu_functions_read_ > 0) {
    builder_->SetMeta("import.format", "pytorch-profiler-without-kineto");
    builder_->SetMeta("import.time_origin", "the profiler's start (the file holds no clock)");
    sink_.Note(fmt::format("{}: the older PyTorch profiler format (PyTorch without Kineto): {} CPU function{} imported "
                           "as ranges (cpu_op; ProfilerStep#N as user_annotation); the file holds no clock and its "
                           "times count from the profiler's start, so the rank starts at 0 ns: ranks line up at "
                           "their profilers' starts",
                           source_, cpu_functions_imported_, cpu_functions_imported_ == 1 ? "" : "s"));
  }
  if (!skipped_.empty()) {
    std::vector<std::pair<std::string, uint64_t>> skipped(skipped_.begin(), skipped_.end());
    std::stable_sort(skipped.begin(), skipped.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    uint64_t total = 0;
    std::string list;
    for (const auto& [what, count] : skipped) {
      total += count;
      if (list.size() < 200) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", Printable(what, 40), count);
    }
    sink_.NoteLeftOut(fmt::format("{}: left out {} event{} of kinds rankscope does not import ({})", source_, total,
                                  total == 1 ? "" : "s", list));
  }
}

Result<uint64_t> KinetoImporter::ConvertEvents(od::document& doc, od::array events, uint64_t index) {
  for (auto element : events) {
    od::value value;
    if (error_code e = std::move(element).get(value)) return Malformed(e, doc, index);
    RawEvent event;
    bool is_object = false;
    if (error_code e = ReadEvent(value, &event, &is_object)) return Malformed(e, doc, index);
    if (!is_object) {
      Token token;
      if (error_code e = ReadToken(value, &token)) return Malformed(e, doc, index);
      builder_->damaged().Count("", "not a JSON object",
                                fmt::format("traceEvents[{}] is {}", index, TypeName(token)));
    } else if (const Damaged damage = Convert(event, index)) {
      builder_->damaged().Count(DamagedKind(event), damage->reason, damage->detail);
    }
    if (++index % kFlushEvery == 0) builder_->Flush();
  }
  return index;
}

Damaged KinetoImporter::Convert(const RawEvent& e, uint64_t index) {
  const std::string_view ph = e.ph.kind == Token::kString ? e.ph.text : std::string_view();
  const std::string_view cat = e.cat.kind == Token::kString ? e.cat.text : std::string_view();
  const std::string_view name = e.name.kind == Token::kString ? e.name.text : std::string_view();

  if (ph == "M") {
    if (name != "thread_name" && name != "process_name") return std::nullopt;
    if (e.args.name.kind != Token::kString) return std::nullopt;
    const std::optional<int64_t> pid = AnyId(e.pid);
    const std::optional<int64_t> tid = AnyId(e.tid);
    if (!pid) return std::nullopt;
    if (name == "process_name") {
      process_names_[*pid] = std::string(e.args.name.text);
    } else if (tid) {
      thread_names_[{*pid, *tid}] = std::string(e.args.name.text);
    }
    return std::nullopt;
  }

  if (!e.cat.present() && e.pid.kind == Token::kString && e.pid.text == kCpuFunctionsPid) {
    return ConvertCpuFunction(e, index);
  }
  if (e.cat.present() && e.cat.kind != Token::kString) {
    Skip("(cat not a string)");
    return std::nullopt;
  }
  if (ph == "i" || ph == "I") {
    if (name == kMemoryEventName) return ConvertMemory(e, index);
    trace::NvtxMarkEvent mark;
    if (Damaged damage = Times(e, index, /*with_duration=*/false, &mark)) return damage;
    if (AnyId(e.pid) && AnyId(e.tid)) {
      CpuPlace place;
      if (Damaged damage = ReadCpuPlace(e, index, &place)) return damage;
      mark.lane = CpuLane(place);
    } else {
      // A global instant ("pid": "Traces", "tid": "Trace PyTorch Profiler"): one lane of its
      // own, pid and tid 0, named after the first such event's tid.
      if (global_lane_name_.empty()) {
        global_lane_name_ = e.tid.kind == Token::kString && !e.tid.text.empty() ? std::string(e.tid.text)
                            : e.pid.kind == Token::kString && !e.pid.text.empty() ? std::string(e.pid.text)
                                                                                    : std::string("global instants");
      }
      LaneKey key;
      key.kind = trace::LaneKind::kCpuThread;
      mark.lane = Lane(key);
    }
    mark.name = Intern(name);
    mark.domain = Intern(cat);
    if (e.args.object) mark.args = InternArgs(e.args.text);
    builder_->events().nvtx_marks.push_back(mark);
    return std::nullopt;
  }

  if ((cat == "ac2g" || cat == "async_cpu_to_gpu") && (ph == "s" || ph == "f")) return ReadFlow(e, index, ph == "s");

  const Category category = CategoryOf(cat);
  if (category == Category::kOther || ph != "X") {
    if (category != Category::kOther && !e.ph.present()) return EventDamage(e, index, "without ph", "no ph");
    if (!cat.empty()) {
      Skip(cat);
    } else if (ph.empty() || ph == "X") {
      Skip(ph.empty() ? "(no ph, no cat)" : "(no cat)");
    } else {
      std::array<char, 32> what{};
      const int shown = static_cast<int>(std::min<size_t>(ph.size(), 20));
      const int length = std::snprintf(what.data(), what.size(), "ph %.*s", shown, ph.data());
      Skip(std::string_view(what.data(), static_cast<size_t>(std::max(length, 0))));
    }
    return std::nullopt;
  }
  if (e.name.present() && e.name.kind != Token::kString) {
    return EventDamage(e, index, "without a valid name", fmt::format("name is {}, not a string", TypeName(e.name)));
  }
  if (e.args.self.present() && !e.args.object) {
    return EventDamage(e, index, "with args that are not an object",
                       fmt::format("args is {}, not an object", TypeName(e.args.self)));
  }

  // Every field is read and checked first; only then are lanes and strings made and the
  // event added.
  trace::EventTables& out = builder_->events();
  switch (category) {
    case Category::kKernel: {
      trace::KernelEvent k;
      GpuPlace place;
      if (Damaged damage = Times(e, index, true, &k)) return damage;
      if (Damaged damage = ReadGpuPlace(e, index, e.args.device, e.args.context, &place)) return damage;
      if (Damaged damage = Correlation(e, index, e.args.correlation, &k.correlation_id)) return damage;
      for (const auto& [dim, field, label] : {std::tuple{&e.args.grid, &k.grid, "args.grid"},
                                              std::tuple{&e.args.block, &k.block, "args.block"}}) {
        if (!dim->present) continue;
        if (!dim->valid) {
          return EventDamage(e, index, fmt::format("without a valid {}", label),
                             fmt::format("{} is not [x, y, z] of unsigned integers", label));
        }
        *field = dim->value;
      }
      std::optional<int64_t> registers, shared;
      if (Damaged damage = Integer(e, index, e.args.registers, "args.registers per thread", &registers)) return damage;
      if (Damaged damage = Integer(e, index, e.args.shared_memory, "args.shared memory", &shared)) return damage;
      if (registers.value_or(0) < 0 || registers.value_or(0) > UINT32_MAX) {
        return EventDamage(e, index, "without a valid args.registers per thread",
                           "args.registers per thread is out of range");
      }
      if (shared.value_or(0) < 0 || shared.value_or(0) > UINT32_MAX) {
        return EventDamage(e, index, "without a valid args.shared memory", "args.shared memory is out of range");
      }
      k.registers_per_thread = static_cast<uint32_t>(registers.value_or(0));
      // Kineto writes static + dynamic shared memory as one number.
      k.static_shared_bytes = static_cast<uint32_t>(shared.value_or(0));
      k.lane = GpuLane(place);
      k.name = Intern(name);
      if (!AwaitFlow(e, k, &kernels_awaiting_)) out.kernels.push_back(k);
      return std::nullopt;
    }
    case Category::kMemcpy: {
      trace::MemcpyEvent m;
      GpuPlace place;
      if (Damaged damage = Times(e, index, true, &m)) return damage;
      // Peer copies name their devices fromDevice / inDevice / toDevice.
      const Token& device = e.args.device.present() ? e.args.device : e.args.in_device;
      const Token& context = e.args.context.present() ? e.args.context : e.args.in_context;
      if (Damaged damage = ReadGpuPlace(e, index, device, context, &place)) return damage;
      if (Damaged damage = Correlation(e, index, e.args.correlation, &m.correlation_id)) return damage;
      std::optional<int64_t> bytes, from, to;
      if (Damaged damage = Integer(e, index, e.args.bytes, "args.bytes", &bytes)) return damage;
      if (Damaged damage = Integer(e, index, e.args.from_device, "args.fromDevice", &from)) return damage;
      if (Damaged damage = Integer(e, index, e.args.to_device, "args.toDevice", &to)) return damage;
      if (bytes.value_or(0) < 0) return EventDamage(e, index, "without a valid args.bytes", "args.bytes is negative");
      m.bytes = static_cast<uint64_t>(bytes.value_or(0));
      if (from && *from >= 0 && *from <= INT32_MAX) m.src_device = static_cast<int32_t>(*from);
      if (to && *to >= 0 && *to <= INT32_MAX) m.dst_device = static_cast<int32_t>(*to);
      ParseMemcpyName(name, &m);
      m.lane = GpuLane(place);
      m.name = Intern(name);
      if (!AwaitFlow(e, m, &memcpys_awaiting_)) out.memcpys.push_back(m);
      return std::nullopt;
    }
    case Category::kMemset: {
      trace::MemsetEvent m;
      GpuPlace place;
      if (Damaged damage = Times(e, index, true, &m)) return damage;
      if (Damaged damage = ReadGpuPlace(e, index, e.args.device, e.args.context, &place)) return damage;
      if (Damaged damage = Correlation(e, index, e.args.correlation, &m.correlation_id)) return damage;
      std::optional<int64_t> bytes;
      if (Damaged damage = Integer(e, index, e.args.bytes, "args.bytes", &bytes)) return damage;
      if (bytes.value_or(0) < 0) return EventDamage(e, index, "without a valid args.bytes", "args.bytes is negative");
      m.bytes = static_cast<uint64_t>(bytes.value_or(0));
      if (name.starts_with("Memset")) m.memory_kind = MemoryKindsIn(name).first;
      m.lane = GpuLane(place);
      m.name = Intern(name);
      if (!AwaitFlow(e, m, &memsets_awaiting_)) out.memsets.push_back(m);
      return std::nullopt;
    }
    case Category::kRuntime:
    case Category::kDriver: {
      trace::ApiCallEvent a;
      CpuPlace place;
      if (Damaged damage = Times(e, index, true, &a)) return damage;
      if (Damaged damage = ReadCpuPlace(e, index, &place)) return damage;
      if (Damaged damage = Correlation(e, index, e.args.correlation, &a.correlation_id)) return damage;
      std::optional<int64_t> cbid, external;
      if (Damaged damage = Integer(e, index, e.args.cbid, "args.cbid", &cbid)) return damage;
      if (Damaged damage = Integer(e, index, e.args.external_id, "args.External id", &external)) return damage;
      if (cbid.value_or(0) < 0 || cbid.value_or(0) > UINT32_MAX) {
        return EventDamage(e, index, "without a valid args.cbid", "args.cbid is out of range");
      }
      a.domain = category == Category::kRuntime ? trace::ApiDomain::kRuntime : trace::ApiDomain::kDriver;
      a.callback_id = static_cast<uint32_t>(cbid.value_or(0));
      // The innermost op's External id: the range (cpu_op) that made the call.
      a.external_id = static_cast<uint64_t>(external.value_or(0));
      a.lane = CpuLane(place);
      a.name = Intern(name);
      if (!AwaitFlow(e, a, &calls_awaiting_)) out.api_calls.push_back(a);
      return std::nullopt;
    }
    case Category::kSync: {
      trace::SyncEvent s;
      GpuPlace place;
      if (Damaged damage = Times(e, index, true, &s)) return damage;
      if (Damaged damage = ReadGpuPlace(e, index, e.args.device, e.args.context, &place)) return damage;
      if (Damaged damage = Correlation(e, index, e.args.correlation, &s.correlation_id)) return damage;
      std::optional<int64_t> wait_on, event_id;
      if (Damaged damage = Integer(e, index, e.args.wait_on_stream, "args.wait_on_stream", &wait_on)) return damage;
      if (Damaged damage = Integer(e, index, e.args.wait_on_event, "args.wait_on_cuda_event_id", &event_id)) {
        return damage;
      }
      s.sync_kind = SyncKindFromName(name);
      s.context = place.context.value_or(0);
      // The stream waited on: a Stream Wait Event waits on another stream's event.
      if (s.sync_kind == trace::SyncKind::kStreamWaitEvent && wait_on && *wait_on >= 0 && *wait_on != kNoStream) {
        s.stream = static_cast<uint64_t>(*wait_on);
      } else {
        s.stream = place.stream.value_or(0);
      }
      if (event_id && *event_id > 0) s.cuda_event_id = static_cast<uint64_t>(*event_id);
      s.lane = GpuLane(place);
      s.name = Intern(name);
      out.syncs.push_back(s);
      return std::nullopt;
    }
    case Category::kCpuRange:
    case Category::kGpuRange: {
      trace::NvtxRangeEvent r;
      CpuPlace cpu;
      GpuPlace gpu;
      if (Damaged damage = Times(e, index, true, &r)) return damage;
      if (category == Category::kCpuRange) {
        if (Damaged damage = ReadCpuPlace(e, index, &cpu)) return damage;
      } else {
        if (Damaged damage = ReadGpuPlace(e, index, e.args.device, e.args.context, &gpu)) return damage;
      }
      std::optional<int64_t> external;
      if (Damaged damage = Integer(e, index, e.args.external_id, "args.External id", &external)) return damage;
      r.lane = category == Category::kCpuRange ? CpuLane(cpu) : GpuLane(gpu);
      r.name = Intern(name);
      r.domain = Intern(cat);
      r.style = trace::NvtxRangeStyle::kPushPop;
      r.correlation_id = static_cast<uint64_t>(external.value_or(0));
      // Annotations keep their args; ops only those that size their data (the rest differs
      // on every op: kept, it would dwarf the rest of the file).
      if (e.args.object) {
        r.args = cat == "user_annotation" || cat == "gpu_user_annotation" ? InternArgs(e.args.text)
                                                                          : InternSizeArgs(e.args);
      }
      out.nvtx_ranges.push_back(r);
      return std::nullopt;
    }
    case Category::kOther: break;
  }
  return std::nullopt;
}

Damaged KinetoImporter::ConvertCpuFunction(const RawEvent& e, uint64_t index) {
  ++cpu_functions_read_;
  const std::string_view ph = e.ph.kind == Token::kString ? e.ph.text : std::string_view();
  if (ph != "X") {
    if (!e.ph.present()) return EventDamage(e, index, "without ph", "no ph");
    Skip("(CPU functions, ph not X)");
    return std::nullopt;
  }
  if (e.name.present() && e.name.kind != Token::kString) {
    return EventDamage(e, index, "without a valid name", fmt::format("name is {}, not a string", TypeName(e.name)));
  }
  // A remote RPC call's event: " node_id:1, thread_id:5 ", on that node's clock.
  if (e.tid.kind == Token::kString && e.tid.text.find("node_id:") != std::string_view::npos) {
    Skip("(CPU functions of remote RPC calls)");
    return std::nullopt;
  }
  trace::NvtxRangeEvent r;
  if (Damaged damage = Times(e, index, true, &r)) return damage;
  if (!e.tid.present()) return EventDamage(e, index, "without a valid tid", "no tid");
  std::optional<int64_t> tid;
  if (Damaged damage = Id(e, index, e.tid, "tid", &tid)) return damage;
  if (e.args.self.present() && !e.args.object) {
    return EventDamage(e, index, "with args that are not an object",
                       fmt::format("args is {}, not an object", TypeName(e.args.self)));
  }
  // The file has no process id: the thread's lane has pid 0, named after the "process".
  process_names_.try_emplace(0, std::string(kCpuFunctionsPid));
  LaneKey key;
  key.kind = trace::LaneKind::kCpuThread;
  key.tid = *tid;
  r.lane = Lane(key);
  const std::string_view name = e.name.kind == Token::kString ? e.name.text : std::string_view();
  r.name = Intern(name);
  // Kineto files the step annotation under user_annotation: the step is no op.
  r.domain = Intern(name.starts_with("ProfilerStep#") ? "user_annotation" : "cpu_op");
  r.style = trace::NvtxRangeStyle::kPushPop;
  if (e.args.object) r.args = InternSizeArgs(e.args);
  builder_->events().nvtx_ranges.push_back(r);
  ++cpu_functions_imported_;
  return std::nullopt;
}

Damaged KinetoImporter::ConvertMemory(const RawEvent& e, uint64_t index) {
  trace::EventCommon at;
  if (Damaged damage = Times(e, index, /*with_duration=*/false, &at)) return damage;
  if (e.args.self.present() && !e.args.object) {
    return EventDamage(e, index, "with args that are not an object",
                       fmt::format("args is {}, not an object", TypeName(e.args.self)));
  }
  const Args& args = e.args;
  std::optional<int64_t> type, device, total_allocated, total_reserved, bytes;
  if (Damaged damage = Integer(e, index, args.device_type, "args.Device Type", &type)) return damage;
  if (!type) return EventDamage(e, index, "without a valid args.Device Type", "no args.Device Type");
  const bool cpu = *type == kCpuDeviceType;
  if (Damaged damage = Integer(e, index, args.device_id, "args.Device Id", &device)) return damage;
  // The CPU is one device whatever its id (PyTorch writes -1); every other type needs one.
  if (cpu) {
    device = -1;
  } else if (!device) {
    return EventDamage(e, index, "without a valid args.Device Id", "no args.Device Id");
  } else if (*device < 0 || *device > INT32_MAX) {
    return EventDamage(e, index, "without a valid args.Device Id",
                       fmt::format("args.Device Id {} is out of range", *device));
  }
  if (Damaged damage = Integer(e, index, args.total_allocated, "args.Total Allocated", &total_allocated)) return damage;
  if (Damaged damage = Integer(e, index, args.total_reserved, "args.Total Reserved", &total_reserved)) return damage;
  for (const auto& [total, label] : {std::pair{total_allocated, "args.Total Allocated"},
                                     std::pair{total_reserved, "args.Total Reserved"}}) {
    if (total && *total < 0) {
      return EventDamage(e, index, fmt::format("without a valid {}", label), fmt::format("{} is negative", label));
    }
  }
  MemoryCounters& counters = memory_counters_[{*type, *device}];
  int64_t allocated = 0;
  if (total_allocated) {
    allocated = *total_allocated;
  } else {
    // Older traces: the allocator's total is the sum of the changes, none below zero (frees
    // of memory allocated before the profiler started).
    if (Damaged damage = Integer(e, index, args.allocation_bytes, "args.Bytes", &bytes)) return damage;
    if (!bytes) {
      return EventDamage(e, index, "without a valid args.Bytes", "neither args.Total Allocated nor args.Bytes");
    }
    if (__builtin_add_overflow(counters.allocated_bytes, *bytes, &allocated)) {
      return EventDamage(e, index, "without a valid args.Bytes",
                         fmt::format("args.Bytes {} takes the running total out of range", *bytes));
    }
    allocated = std::max<int64_t>(allocated, 0);
  }

  // Every field is sound: the lanes and samples.
  counters.allocated_bytes = allocated;
  const std::string category = cpu                         ? std::string("cpu")
                               : *type == kCudaDeviceType ? fmt::format("cuda:{}", *device)
                                                          : fmt::format("device type {}:{}", *type, *device);
  const int32_t lane_device = *type == kCudaDeviceType ? static_cast<int32_t>(*device) : -1;
  if (counters.allocated == trace::kNoLane) {
    counters.allocated = MemoryCounterLane(trace::kPytorchAllocatedSource, category, lane_device);
  }
  std::vector<trace::CounterSample>& samples = builder_->events().counter_samples;
  samples.push_back({counters.allocated, at.start_ns, static_cast<double>(allocated)});
  if (total_reserved) {
    if (counters.reserved == trace::kNoLane) {
      counters.reserved = MemoryCounterLane(trace::kPytorchReservedSource, category, lane_device);
    }
    samples.push_back({counters.reserved, at.start_ns, static_cast<double>(*total_reserved)});
  }
  return std::nullopt;
}

trace::LaneId KinetoImporter::MemoryCounterLane(std::string_view source, std::string_view category, int32_t device) {
  trace::Lane lane;
  lane.kind = trace::LaneKind::kCounter;
  lane.device = device;
  lane.name = trace::MemoryCounterName(source, category);
  return builder_->Lane(lane);
}

}  // namespace

void ReleaseReadingBuffers() {
  ReadingBuffers& buffers = ThreadReadingBuffers();
  std::string().swap(buffers.text);
  std::string().swap(buffers.compressed);
  buffers.parser = od::parser();
}

Status ImportKineto(const fs::path& file, RunSink& sink, KinetoReadLimits limits) {
  try {
    KinetoImporter importer(file, sink, limits);
    return importer.Run();
  } catch (const std::bad_alloc&) {
    return Unsupported(fmt::format("{}: out of memory while importing", Quoted(file)));
  } catch (const std::exception& e) {
    return InternalError(fmt::format("{}: {}", Quoted(file), e.what()));
  }
}

}  // namespace rankscope::interop::import
