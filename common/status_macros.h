// Status propagation macros. Debian's abseil (20220623) ships none, so ringcache defines its own
// once, here. Header-only; thread-compatible (they only touch their arguments).
#ifndef RINGCACHE_COMMON_STATUS_MACROS_H_
#define RINGCACHE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RC_CONCAT_INNER_(a, b) a##b
#define RC_CONCAT_(a, b) RC_CONCAT_INNER_(a, b)

// Returns from the current function with the status of `expr` if it is not OK.
#define RC_RETURN_IF_ERROR(expr)                          \
  do {                                                    \
    ::absl::Status rc_status_ = (expr);                   \
    if (!rc_status_.ok()) return rc_status_;              \
  } while (0)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status, else moves the value
// into `lhs` (which may be a declaration such as `auto x`).
#define RC_ASSIGN_OR_RETURN(lhs, rexpr) \
  RC_ASSIGN_OR_RETURN_IMPL_(RC_CONCAT_(rc_statusor_, __LINE__), lhs, rexpr)

#define RC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // RINGCACHE_COMMON_STATUS_MACROS_H_
