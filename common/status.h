// Status and Result: errors as values.
//
// A Status is either OK or an error code with a one-line, human-readable message. A Result<T>
// holds either a T or a non-OK Status. Functions that can fail return one of these; a cache miss
// is never an error (it is an empty std::optional). Exceptions are reserved for the top of main.
//
// Thread safety: values; no shared state.
#pragma once

#include <concepts>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace hlocache {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // Malformed input from the caller (bad HLO, bad key, bad flag).
  kNotFound,            // A named thing (file, computation) does not exist.
  kFailedPrecondition,  // The input is well formed but unsafe or unsupported for this use.
  kUnimplemented,
  kIoError,
  kInternal,
  kPermissionDenied,   // Not allowed: read-only store or server, missing role, file mode.
  kUnavailable,        // Busy or held elsewhere (a store locked by another process).
  kResourceExhausted,  // Out of space or over a limit (disk full, size cap, queue full).
  kDataLoss,           // Stored data found corrupt or unreadable.
  kDeadlineExceeded,   // Ran past its time limit (a compile killed at its timeout).
};

std::string_view StatusCodeName(StatusCode code);

struct ErrorValue;

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK.
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  // The error a HLOCACHE_ASSIGN_OR_RETURN propagates, in functions that return a Status.
  Status(ErrorValue error);  // NOLINT(google-explicit-constructor)

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
inline Status PermissionDenied(std::string message) {
  return Status(StatusCode::kPermissionDenied, std::move(message));
}
inline Status Unavailable(std::string message) {
  return Status(StatusCode::kUnavailable, std::move(message));
}
inline Status ResourceExhausted(std::string message) {
  return Status(StatusCode::kResourceExhausted, std::move(message));
}
inline Status DataLoss(std::string message) {
  return Status(StatusCode::kDataLoss, std::move(message));
}
inline Status DeadlineExceeded(std::string message) {
  return Status(StatusCode::kDeadlineExceeded, std::move(message));
}

// The error side of a Result, as returned by Error(status).
struct ErrorValue {
  Status status;
};
inline ErrorValue Error(Status status) { return ErrorValue{std::move(status)}; }
inline Status::Status(ErrorValue error) : Status(std::move(error.status)) {}

// Result<T>: a T, or the non-OK Status that explains why there is none. A small std::expected
// (which clang 14 cannot use with libstdc++ 12): build the error side with `return Error(s);`.
template <typename T>
class [[nodiscard]] Result {
 public:
  template <typename U = T>
  requires std::constructible_from<T, U&&> &&(!std::same_as<std::remove_cvref_t<U>, ErrorValue>)&&(
      !std::same_as<std::remove_cvref_t<U>, Result>)Result(U&& value)
      : v_(std::in_place_index<0>, std::forward<U>(value)) {}                        // NOLINT
  Result(ErrorValue error) : v_(std::in_place_index<1>, std::move(error.status)) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  T&& operator*() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  // The value, or `fallback` when there is none (like std::optional::value_or).
  T value_or(T fallback) const& { return has_value() ? std::get<0>(v_) : std::move(fallback); }
  T value_or(T fallback) && {
    return has_value() ? std::get<0>(std::move(v_)) : std::move(fallback);
  }
  // The error; only valid when !has_value().
  const Status& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hlocache

// Propagates a non-OK Status from an expression returning Status, out of a function returning a
// Result or a Status (a Status is made from the error side of a Result).
#define HLOCACHE_RETURN_IF_ERROR(expr)                       \
  do {                                                       \
    ::hlocache::Status hlocache_status_ = (expr);            \
    if (!hlocache_status_.ok()) {                            \
      return ::hlocache::Error(std::move(hlocache_status_)); \
    }                                                        \
  } while (false)

#define HLOCACHE_CONCAT_INNER_(a, b) a##b
#define HLOCACHE_CONCAT_(a, b) HLOCACHE_CONCAT_INNER_(a, b)
// `HLOCACHE_ASSIGN_OR_RETURN(auto x, F());` declares x from a Result, or returns its error from a
// function returning a Result.
#define HLOCACHE_ASSIGN_OR_RETURN(lhs, expr) \
  HLOCACHE_ASSIGN_OR_RETURN_IMPL_(HLOCACHE_CONCAT_(hlocache_result_, __LINE__), lhs, expr)
#define HLOCACHE_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr)           \
  auto result = (expr);                                              \
  if (!result.has_value()) return ::hlocache::Error(result.error()); \
  lhs = std::move(*result)
