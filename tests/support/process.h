// Test support for cross-process tests: start a daemon binary with arguments, wait for its ready
// file, kill it (SIGKILL or SIGTERM), fetch HTTP paths, run shell commands. Used only by tests.
//
// Thread-compatible: one DaemonProcess per test thread.
#ifndef RINGCACHE_TESTS_SUPPORT_PROCESS_H_
#define RINGCACHE_TESTS_SUPPORT_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace ringcache::testing {

class DaemonProcess {
 public:
  DaemonProcess() = default;
  ~DaemonProcess();  // SIGKILLs a still-running child

  // Starts `binary args...` with stderr/stdout appended to `log_path`. Returns false on fork
  // failure.
  bool Start(const std::string& binary, const std::vector<std::string>& args,
             const std::string& log_path);
  // Waits up to `timeout_s` for `ready_file` to appear and parses its integer fields
  // ("grpc_port", "http_port", ...). Returns false if the child exits or time runs out.
  bool WaitReady(const std::string& ready_file, double timeout_s = 30);
  int port(const std::string& name) const;
  // Sends `sig` and reaps the child; returns its wait status.
  int Kill(int sig);
  // Waits for the child to exit by itself (up to timeout_s); returns its exit code, or -1.
  int WaitExit(double timeout_s = 30);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::map<std::string, int> ports_;
};

// Runs `cmd` through /bin/sh, capturing stdout+stderr into *output. Returns the exit code.
int RunCommand(const std::string& cmd, std::string* output);
// Performs GET http://127.0.0.1:port/path; returns the status code (or -1) and fills *body.
int HttpGet(int port, const std::string& path, std::string* body);
// Returns a fresh empty directory under the test temp dir.
std::string FreshDir(const std::string& name);
// Reads a whole file ("" if missing).
std::string ReadFile(const std::string& path);

}  // namespace ringcache::testing

#endif  // RINGCACHE_TESTS_SUPPORT_PROCESS_H_
