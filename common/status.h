// Status and Result: errors as values.
//
// A Status is either OK or an error code with a one-line, human-readable message. A Result<T>
// holds either a T or a non-OK Status. Functions that can fail return one of these; a cache miss
// is never an error (it is an empty std::optional). Exceptions are reserved for the top of main.
//
// Thread safety: values; no shared state.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace hlocache {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // Malformed input from the caller (bad HLO, bad key, bad flag).
  kNotFound,         // A named thing (file, computation) does not exist.
  kFailedPrecondition,  // The input is well formed but unsafe or unsupported for this use.
  kUnimplemented,
  kIoError,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK.
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "<code name>: <message>".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}
inline Status NotFound(std::string message) {
  return Status(StatusCode::kNotFound, std::move(message));
}
inline Status FailedPrecondition(std::string message) {
  return Status(StatusCode::kFailedPrecondition, std::move(message));
}
inline Status IoError(std::string message) {
  return Status(StatusCode::kIoError, std::move(message));
}
inline Status Internal(std::string message) {
  return Status(StatusCode::kInternal, std::move(message));
}

// Result<T>: a T, or the Status that explains why there is none. Construct the error side with
// `return std::unexpected(status);` or the Error() helper below.
template <typename T>
using Result = std::expected<T, Status>;

inline std::unexpected<Status> Error(Status status) { return std::unexpected(std::move(status)); }

}  // namespace hlocache

// Propagates a non-OK Status from an expression returning Status.
#define HLOCACHE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::hlocache::Status hlocache_status_ = (expr);        \
    if (!hlocache_status_.ok()) {                        \
      return ::std::unexpected(std::move(hlocache_status_)); \
    }                                                    \
  } while (false)
