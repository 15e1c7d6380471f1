#include "membership/etcd_test_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "membership/etcd_client.h"

#ifndef RINGCACHE_ETCD_BIN
#define RINGCACHE_ETCD_BIN ""
#endif

namespace ringcache::membership {
namespace {

// Binds `n` sockets to 127.0.0.1:0 at once (so the ports differ) and returns their ports.
absl::StatusOr<std::vector<int>> FreePorts(int n) {
  std::vector<int> fds, ports;
  absl::Status status;
  for (int i = 0; i < n && status.ok(); ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      status = absl::InternalError("cannot bind a free port on 127.0.0.1");
    } else {
      ports.push_back(ntohs(sa.sin_port));
    }
    if (fd >= 0) fds.push_back(fd);
  }
  for (int fd : fds) ::close(fd);
  RC_RETURN_IF_ERROR(status);
  return ports;
}

std::string Tail(const std::string& path, size_t max_bytes = 2000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace

std::string EtcdTestServer::FindBinary() {
  const char* env = std::getenv("RINGCACHE_ETCD");
  for (const char* candidate : {env, RINGCACHE_ETCD_BIN, "/usr/bin/etcd"}) {
    if (candidate != nullptr && candidate[0] != '\0' && ::access(candidate, X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

absl::StatusOr<int> EtcdTestServer::FreePort() {
  RC_ASSIGN_OR_RETURN(std::vector<int> ports, FreePorts(1));
  return ports[0];
}

absl::StatusOr<std::unique_ptr<EtcdTestServer>> EtcdTestServer::Start(const std::string& name) {
  std::unique_ptr<EtcdTestServer> s(new EtcdTestServer());
  s->binary_ = FindBinary();
  if (s->binary_.empty()) return absl::NotFoundError("no etcd binary (install etcd-server)");
  const char* tmp = std::getenv("TEST_TMPDIR");
  s->dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/ringcache-etcd-", ::getpid(), "-", name);
  std::filesystem::remove_all(s->dir_);
  std::filesystem::create_directories(s->dir_);
  RC_ASSIGN_OR_RETURN(std::vector<int> ports, FreePorts(2));
  s->endpoint_ = absl::StrCat("127.0.0.1:", ports[0]);
  s->peer_url_ = absl::StrCat("http://127.0.0.1:", ports[1]);
  RC_RETURN_IF_ERROR(s->Spawn());
  return s;
}

EtcdTestServer::~EtcdTestServer() {
  Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::Status EtcdTestServer::Spawn() {
  const std::string client_url = absl::StrCat("http://", endpoint_);
  std::vector<std::string> args = {
      binary_,
      "--name=t",
      absl::StrCat("--data-dir=", dir_, "/data"),
      absl::StrCat("--listen-client-urls=", client_url),
      absl::StrCat("--advertise-client-urls=", client_url),
      absl::StrCat("--listen-peer-urls=", peer_url_),
      absl::StrCat("--initial-advertise-peer-urls=", peer_url_),
      absl::StrCat("--initial-cluster=t=", peer_url_),
      "--logger=zap",
      "--log-outputs=stderr",
  };
  const std::string log = dir_ + "/etcd.log";
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  return WaitUntilServing();
}

absl::Status EtcdTestServer::WaitUntilServing() {
  EtcdClient::Options options;
  options.endpoints = {endpoint_};
  options.dial_timeout = absl::Milliseconds(200);
  options.call_timeout = absl::Milliseconds(500);
  RC_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client, EtcdClient::Create(options));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("etcd exited during startup; log tail:\n", Tail(dir_ + "/etcd.log")));
    }
    if (client->Get("/health-probe").ok()) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("etcd did not answer within 30 s; log tail:\n", Tail(dir_ + "/etcd.log")));
}

void EtcdTestServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

absl::Status EtcdTestServer::Restart() {
  Kill();
  return Spawn();
}

}  // namespace ringcache::membership
