// Errors as values: library code returns Status or Result<T> instead of throwing or exiting.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace rankscope {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller passed something unusable
  kNotFound,          // a file, directory, key or lane does not exist
  kAlreadyExists,     // refusing to overwrite
  kCorrupt,           // the data is damaged or not in the expected format
  kUnsupported,       // a valid input this version cannot handle (e.g. newer schema)
  kIo,                // the operating system or SQLite failed
  kInconsistent,      // inputs that are fine alone but do not belong together
  kUnavailable,       // a facility is missing at run time (no GPU, no driver)
  kInternal,          // a bug in rankscope
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "message" for errors, "ok" otherwise: what a user sees on one line.
  std::string ToString() const { return ok() ? std::string("ok") : message_; }

  // Prefixes the message with context, e.g. the file being read.
  Status WithContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status Inconsistent(std::string m) { return {StatusCode::kInconsistent, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kAlreadyExists: return "already exists";
    case StatusCode::kCorrupt: return "corrupt";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kIo: return "i/o error";
    case StatusCode::kInconsistent: return "inconsistent";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(data_).ok() && "Result built from an ok Status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(data_); }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace rankscope

#define RS_STATUS_CONCAT_INNER(a, b) a##b
#define RS_STATUS_CONCAT(a, b) RS_STATUS_CONCAT_INNER(a, b)

#define RS_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    ::rankscope::Status rs_status_ = (expr);       \
    if (!rs_status_.ok()) return rs_status_;       \
  } while (0)

#define RS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define RS_ASSIGN_OR_RETURN(lhs, expr) \
  RS_ASSIGN_OR_RETURN_IMPL(RS_STATUS_CONCAT(rs_result_, __LINE__), lhs, expr)
