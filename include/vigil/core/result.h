#pragma once
// Status and Result<T>: how fallible calls report failure in Vigil.
// Exceptions never cross the event loop; a failure is a value the caller must look at.

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace vigil {

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  static Status ok() { return Status(); }
  // `err` is an errno value (0 when the failure is not a system error).
  static Status error(std::string message, int err = 0) {
    Status s;
    s.failed_ = true;
    s.err_ = err;
    s.message_ = std::move(message);
    return s;
  }
  // A system call failed: the message names the call, errno is kept.
  static Status sys(std::string call, int err = errno) {
    return error(std::move(call) + " failed", err);
  }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  int err() const { return err_; }
  const std::string& message() const { return message_; }
  // "message (errno: strerror)" when there is an errno, else the message.
  std::string to_string() const {
    if (!failed_) return "ok";
    if (err_ == 0) return message_;
    return message_ + " (" + std::to_string(err_) + ": " + std::strerror(err_) + ")";
  }

 private:
  bool failed_ = false;
  int err_ = 0;
  std::string message_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {}     // NOLINT: implicit on purpose

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  T& operator*() { return std::get<0>(v_); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<1>(v_);
  }

 private:
  std::variant<T, Status> v_;
};

// Return codes of the I/O primitives (recv/send), as nginx's NGX_AGAIN and friends.
inline constexpr long kIoError = -1;
inline constexpr long kIoAgain = -2;

}  // namespace vigil
