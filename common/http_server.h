// A minimal HTTP/1.1 endpoint for /metrics and /healthz. One accept thread serves requests one at a
// time with short socket timeouts; it is for scrapes and probes, not for data. GET and HEAD only.
//
// Thread-safety: Start/Stop are called from one owner thread. Handlers run on the server thread
// and must be thread-safe with respect to the rest of the process.
#ifndef RINGCACHE_COMMON_HTTP_SERVER_H_
#define RINGCACHE_COMMON_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringcache {

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse()>;

  HttpServer() = default;
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers `handler` for exact `path`. REQUIRES: called before Start().
  void Handle(const std::string& path, Handler handler);
  // Binds `host:port` (port 0 picks a free one) and starts serving. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& host, int port);
  // Stops the server thread and closes the socket. Idempotent.
  void Stop();

 private:
  void Loop();
  void Serve(int fd);

  std::map<std::string, Handler> handlers_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
};

// Splits "host:port" into its parts. Accepts "[v6]:port". Returns kInvalidArgument naming the
// input when it is malformed or the port is outside 0..65535.
absl::Status SplitHostPort(const std::string& addr, std::string* host, int* port);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_HTTP_SERVER_H_
