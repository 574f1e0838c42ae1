#pragma once
//! \file
//! `hawk::Status`: what every host entry point returns. Never an abort, never an exception: a code a program
//! can branch on and a message a person can read.

#include <string>
#include <utility>

namespace hawk {

enum class StatusCode : int {
  kSuccess = 0,
  kInvalidArgument,           //!< a shape, length or option that the operation does not accept
  kNullPointer,               //!< a required pointer is null
  kMisalignedPointer,         //!< a pointer is not aligned as the configuration requires
  kIndexOutOfRange,           //!< an index tensor holds a value outside its valid range
  kUnsupportedConfiguration,  //!< valid input, but the chosen compile-time configuration cannot run it
  kWorkspaceTooSmall,         //!< the caller's workspace is smaller than workspace_size() asked for
  kCudaError,                 //!< the CUDA runtime reported an error (its text is in the message)
};

inline const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::kSuccess: return "success";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNullPointer: return "null pointer";
    case StatusCode::kMisalignedPointer: return "misaligned pointer";
    case StatusCode::kIndexOutOfRange: return "index out of range";
    case StatusCode::kUnsupportedConfiguration: return "unsupported configuration";
    case StatusCode::kWorkspaceTooSmall: return "workspace too small";
    case StatusCode::kCudaError: return "CUDA error";
  }
  return "unknown status";
}

//! A status code plus a human-readable message. Default-constructed means success.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status success() { return Status(); }

  bool ok() const { return code_ == StatusCode::kSuccess; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  //! "code: message", for logs and test failures.
  std::string to_string() const {
    std::string text = ::hawk::to_string(code_);
    if (!message_.empty()) text += ": " + message_;
    return text;
  }

 private:
  StatusCode code_ = StatusCode::kSuccess;
  std::string message_;
};

}  // namespace hawk

//! Return early from a host function when `expr` yields a failed Status.
#define HAWK_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::hawk::Status hawk_status_ = (expr);     \
    if (!hawk_status_.ok()) return hawk_status_; \
  } while (0)

//! Return a failed Status with `code` and `message` when `condition` is false.
#define HAWK_REQUIRE(condition, code, message)                        \
  do {                                                                \
    if (!(condition)) return ::hawk::Status((code), (message));       \
  } while (0)
