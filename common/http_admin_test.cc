#include "common/http_admin.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/daemon.h"
#include "common/metrics.h"
#include "common/socket.h"
#include "gtest/gtest.h"

namespace ringcache::http_admin {
namespace {

// One HTTP/1.1 request to 127.0.0.1:port; returns the status line's code and the body.
std::pair<int, std::string> Request(int port, const std::string& method, const std::string& path,
                                    const std::string& body = "") {
  absl::StatusOr<int> fd = DialTcp("127.0.0.1", port, absl::Seconds(5));
  EXPECT_TRUE(fd.ok()) << fd.status();
  if (!fd.ok()) return {0, ""};
  const std::string req = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: x\r\nContent-Length: ",
                                       body.size(), "\r\nConnection: close\r\n\r\n", body);
  EXPECT_EQ(send(*fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(*fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  close(*fd);
  const size_t sp = got.find(' ');
  const size_t head_end = got.find("\r\n\r\n");
  if (sp == std::string::npos || head_end == std::string::npos) return {0, got};
  return {std::stoi(got.substr(sp + 1, 3)), got.substr(head_end + 4)};
}

TEST(HttpAdminTest, ReadyzFollowsServingAndEveryCheck) {
  metrics::Registry registry;
  MetricsServer http;
  absl::StatusOr<int> port = http.Start(&registry, "127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  SetServing(false);
  EXPECT_EQ(Request(*port, "GET", "/readyz"),
            std::make_pair(503, std::string("not ready: starting or stopping\n")));
  SetServing(true);
  EXPECT_EQ(Request(*port, "GET", "/readyz"), std::make_pair(200, std::string("ready\n")));
  std::string why = "fenced: quarantined";
  {
    ReadinessCheck check("cache node", [&why] { return why; });
    EXPECT_EQ(Request(*port, "GET", "/readyz"),
              std::make_pair(503, std::string("not ready: cache node: fenced: quarantined\n")));
    EXPECT_EQ(Request(*port, "GET", "/healthz").first, 200) << "alive all the same";
    why.clear();
    EXPECT_EQ(Request(*port, "GET", "/readyz").first, 200);
    why = "device failed";
  }
  EXPECT_EQ(Request(*port, "GET", "/readyz").first, 200) << "the check ended with its owner";
  EXPECT_EQ(Request(*port, "GET", "/metrics").first, 200) << "the exposer still serves the rest";
  SetServing(false);
}

TEST(HttpAdminTest, LogLevelIsReadAndChangedAtRunTime) {
  metrics::Registry registry;
  MetricsServer http;
  absl::StatusOr<int> port = http.Start(&registry, "127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_TRUE(SetLogLevel("info").ok());
  EXPECT_EQ(Request(*port, "GET", "/loglevel"), std::make_pair(200, std::string("info\n")));
  EXPECT_EQ(Request(*port, "PUT", "/loglevel", "debug\n"),
            std::make_pair(200, std::string("debug\n")));
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  const auto bad = Request(*port, "PUT", "/loglevel", "loud");
  EXPECT_EQ(bad.first, 400);
  EXPECT_NE(bad.second.find("unknown log level 'loud'"), std::string::npos) << bad.second;
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug) << "unchanged by a bad level";
  EXPECT_EQ(Request(*port, "DELETE", "/loglevel").first, 405);
  EXPECT_TRUE(SetLogLevel("info").ok());
}

TEST(HttpAdminTest, StartLevelFromTheFlagThenTheEnvironment) {
  ASSERT_EQ(setenv("SPDLOG_LEVEL", "warn,grpc=trace", 1), 0);
  ASSERT_TRUE(ApplyStartLogLevel(std::nullopt).ok());
  EXPECT_EQ(LogLevel(), "warning");
  ASSERT_TRUE(ApplyStartLogLevel(std::string("error")).ok()) << "the flag wins";
  EXPECT_EQ(LogLevel(), "error");
  EXPECT_EQ(ApplyStartLogLevel(std::string("chatty")).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(setenv("SPDLOG_LEVEL", "nonsense", 1), 0);
  EXPECT_EQ(ApplyStartLogLevel(std::nullopt).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(unsetenv("SPDLOG_LEVEL"), 0);
  ASSERT_TRUE(ApplyStartLogLevel(std::nullopt).ok());
  EXPECT_EQ(LogLevel(), "info");
}

// One datagram from `fd` (60 s at most: the test waits for an event, not a time).
std::string NextDatagram(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 60000) != 1) return "";
  char buf[512];
  const ssize_t n = recv(fd, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(SystemdNotifierTest, ReadyThenWatchdogWithTheReadinessThenStopping) {
  const std::string path = ::testing::TempDir() + "/notify-" + std::to_string(getpid());
  std::filesystem::remove(path);
  const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(setenv("NOTIFY_SOCKET", path.c_str(), 1), 0);
  ASSERT_EQ(setenv("WATCHDOG_USEC", "100000", 1), 0);
  ASSERT_EQ(unsetenv("WATCHDOG_PID"), 0);
  SetServing(true);
  std::string why = "fenced: quarantined";
  {
    ReadinessCheck check("cache node", [&why] { return why; });
    auto notifier = std::make_unique<SystemdNotifier>();
    EXPECT_EQ(NextDatagram(fd), "READY=1\nSTATUS=serving");
    EXPECT_EQ(NextDatagram(fd), "WATCHDOG=1\nSTATUS=not ready: cache node: fenced: quarantined")
        << "a fenced daemon is alive: the watchdog is fed, the status says why it is not ready";
    notifier.reset();
    std::string last;
    for (int i = 0; i < 100 && last != "STOPPING=1"; ++i) last = NextDatagram(fd);
    EXPECT_EQ(last, "STOPPING=1");
  }
  SetServing(false);
  ASSERT_EQ(unsetenv("NOTIFY_SOCKET"), 0);
  ASSERT_EQ(unsetenv("WATCHDOG_USEC"), 0);
  EXPECT_FALSE(NotifySystemd("READY=1")) << "nothing without NOTIFY_SOCKET";
  close(fd);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ringcache::http_admin
