// Test support: a real single-member etcd on 127.0.0.1 with free ports and a fresh data dir,
// which a test can stop (SIGKILL) and restart on the same ports and data dir. The child gets
// SIGKILL if the thread that started it ends (PR_SET_PDEATHSIG follows the thread, not the
// process): Start and Restart from a thread that outlives the server, the test's own.
//
// Thread-compatible.
#ifndef RINGCACHE_MEMBERSHIP_ETCD_TEST_SERVER_H_
#define RINGCACHE_MEMBERSHIP_ETCD_TEST_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringcache::membership {

class EtcdTestServer {
 public:
  // Returns the etcd binary to use ($RINGCACHE_ETCD, else the one found at configure time, else
  // /usr/bin/etcd), or "" if none is executable.
  static std::string FindBinary();
  // Returns a TCP port on 127.0.0.1 that was free a moment ago.
  static absl::StatusOr<int> FreePort();

  // Starts etcd and waits until it answers. `name` labels its directory under $TEST_TMPDIR (or
  // /tmp).
  static absl::StatusOr<std::unique_ptr<EtcdTestServer>> Start(const std::string& name);
  ~EtcdTestServer();  // kills etcd and removes the data dir

  // Kills etcd with SIGKILL and reaps it.
  void Kill();
  // Starts etcd again with the same ports and data dir and waits until it answers.
  absl::Status Restart();

  // "127.0.0.1:<client port>".
  const std::string& endpoint() const { return endpoint_; }
  bool running() const { return pid_ > 0; }

 private:
  EtcdTestServer() = default;
  absl::Status Spawn();
  absl::Status WaitUntilServing();

  std::string binary_;
  std::string dir_;
  std::string endpoint_;
  std::string peer_url_;
  pid_t pid_ = -1;
};

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_ETCD_TEST_SERVER_H_
