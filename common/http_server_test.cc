#include "common/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace ringcache {
namespace {

std::string Fetch(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return "connect failed";
  ::send(fd, request.data(), request.size(), 0);
  std::string out;
  char buf[1024];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST(HttpServerTest, ServesRegisteredPathsAnd404) {
  HttpServer s;
  s.Handle("/healthz", [] { return HttpResponse{200, "text/plain", "ok\n"}; });
  auto port = s.Start("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  std::string r = Fetch(*port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK", 0), 0u) << r;
  EXPECT_NE(r.find("\r\n\r\nok\n"), std::string::npos);
  EXPECT_EQ(Fetch(*port, "GET /nope HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(Fetch(*port, "POST /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(Fetch(*port, "garbage\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  // Still serving after bad requests.
  EXPECT_EQ(Fetch(*port, "GET /healthz HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  s.Stop();
}

TEST(HttpServerTest, SplitHostPort) {
  std::string h;
  int p = 0;
  EXPECT_TRUE(SplitHostPort("127.0.0.1:80", &h, &p).ok());
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 80);
  EXPECT_FALSE(SplitHostPort("nohost", &h, &p).ok());
  EXPECT_FALSE(SplitHostPort("h:99999", &h, &p).ok());
  EXPECT_FALSE(SplitHostPort("h:x", &h, &p).ok());
}

}  // namespace
}  // namespace ringcache
