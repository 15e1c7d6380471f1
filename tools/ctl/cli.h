// The command line of ringcachectl (docs/design.md §8): CLI11 subcommands with --help at every
// level, global --gateway/--json/--timeout, and the mapping of results to exit codes. main.cc only
// calls RunCtl with the process's streams.
//
// Exit codes: 0 success (and --help), 1 the gateway refused or could not be reached, 2 usage
// error (the message and the usage text of the command go to `err`).
//
// Thread-compatible: one RunCtl at a time per set of streams.
#ifndef RINGCACHE_TOOLS_CTL_CLI_H_
#define RINGCACHE_TOOLS_CTL_CLI_H_

#include <istream>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"

namespace ringcache::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// The streams of one invocation. None is owned.
struct CtlIo {
  std::istream* in = nullptr;   // answers to the `vdi delete` confirmation prompt
  std::ostream* out = nullptr;  // results (tables, JSON)
  std::ostream* err = nullptr;  // errors, usage text, prompts
  bool in_is_terminal = false;  // prompt only when a person can answer
};

// Parses `argv` and runs the command it names against the gateway. Returns the exit code.
int RunCtl(int argc, const char* const* argv, const CtlIo& io);

// Returns the admin address of the gateway registered in etcd at `endpoints` under `prefix`
// (the one with the lowest id), or why there is none.
absl::StatusOr<std::string> GatewayFromEtcd(const std::string& endpoints,
                                            const std::string& prefix, double timeout_s);

}  // namespace ringcache::ctl

#endif  // RINGCACHE_TOOLS_CTL_CLI_H_
