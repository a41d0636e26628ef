// Result<T>: a value or an Error with a message that names the offending thing.
// Untrusted input (files, sizes, token ids, request fields) reports problems through Result;
// programmer invariants use KILN_ASSERT (core/check.h). Hot paths do not throw.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace kiln {

struct Error {
  std::string message;  // "[where] what: details", e.g. "gguf: tensor 'x' data past end of file"
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    KILN_ASSERT(ok(), "Result::value() on an error");
    return std::get<0>(v_);
  }
  const T& value() const& {
    KILN_ASSERT(ok(), "Result::value() on an error");
    return std::get<0>(v_);
  }
  T&& value() && {
    KILN_ASSERT(ok(), "Result::value() on an error");
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    KILN_ASSERT(!ok(), "Result::error() on a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Status: a Result with no value.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    KILN_ASSERT(!ok_, "Status::error() on success");
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

// Builds an Error from pieces streamed together: make_error("gguf: key '", key, "' ...").
template <class... Args>
Error make_error(Args&&... args) {
  std::string s;
  (s.append(to_message_piece(std::forward<Args>(args))), ...);
  return Error{std::move(s)};
}

}  // namespace kiln

// Propagates an error from an expression returning Result<T> or Status.
#define KILN_TRY(expr)                                   \
  do {                                                   \
    auto&& kiln_try_result_ = (expr);                    \
    if (!kiln_try_result_.ok()) return kiln_try_result_.error(); \
  } while (0)

// Assigns the value of a Result<T> expression to `lhs` or propagates its error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_r_, __LINE__), lhs, expr)
#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)
#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.error();                \
  lhs = std::move(tmp).value()
