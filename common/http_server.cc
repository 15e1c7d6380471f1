// Implementation of the /metrics and /healthz endpoint.
#include "common/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringcache {
namespace {

constexpr size_t kMaxRequestBytes = 16 * 1024;

const char* Reason(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::Status SplitHostPort(const std::string& addr, std::string* host, int* port) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("address '", addr, "' is not host:port"));
  }
  std::string h = addr.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(addr.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address '", addr, "' has a bad port"));
  }
  *host = h;
  *port = p;
  return absl::OkStatus();
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Handle(const std::string& path, Handler handler) {
  handlers_[path] = std::move(handler);
}

absl::StatusOr<int> HttpServer::Start(const std::string& host, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("http: '", host, "' is not an IPv4 address"));
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::listen(listen_fd_, 64) != 0) {
    int err = errno;
    ::close(listen_fd_);
    listen_fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("http: cannot listen on ", host, ":", port, ": ", strerror(err)));
  }
  socklen_t len = sizeof(sa);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  thread_ = std::thread([this] { Loop(); });
  return static_cast<int>(ntohs(sa.sin_port));
}

void HttpServer::Stop() {
  if (thread_.joinable()) {
    char c = 'x';
    (void)!::write(wake_pipe_[1], &c, 1);
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_pipe_[0], &wake_pipe_[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void HttpServer::Loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[1].revents & POLLIN)) return;
    if (fds[0].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      timeval tv{2, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      Serve(fd);
      ::close(fd);
    }
  }
}

void HttpServer::Serve(int fd) {
  std::string req;
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < kMaxRequestBytes) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    req.append(buf, static_cast<size_t>(n));
  }
  HttpResponse resp;
  const size_t sp1 = req.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : req.find(' ', sp1 + 1);
  bool head = false;
  if (sp2 == std::string::npos) {
    resp = {400, "text/plain", "bad request\n"};
  } else {
    const std::string method = req.substr(0, sp1);
    std::string path = req.substr(sp1 + 1, sp2 - sp1 - 1);
    if (size_t q = path.find('?'); q != std::string::npos) path.resize(q);
    head = method == "HEAD";
    if (method != "GET" && !head) {
      resp = {405, "text/plain", "only GET and HEAD\n"};
    } else if (auto it = handlers_.find(path); it != handlers_.end()) {
      resp = it->second();
    } else {
      resp = {404, "text/plain", "not found\n"};
    }
  }
  std::string out = absl::StrCat("HTTP/1.1 ", resp.code, " ", Reason(resp.code),
                                 "\r\nContent-Type: ", resp.content_type,
                                 "\r\nContent-Length: ", resp.body.size(),
                                 "\r\nConnection: close\r\n\r\n");
  if (!head) out += resp.body;
  WriteAll(fd, out);
}

}  // namespace ringcache
