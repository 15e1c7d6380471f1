// PeerChannel's connection settings against a peer that is slow to finish a connection: an
// overloaded machine, where a TLS handshake took over a second and every attempt was cut off.
#include "common/grpc_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ringcache {
namespace {

int ListenLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 64) != 0) {
    return -1;
  }
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A TCP relay in front of `upstream` that holds back the server's first bytes (its HTTP/2
// settings) for `delay` after each connection is accepted: the client's connection attempt
// cannot complete sooner, as behind a handshake on a busy machine.
class SlowRelay {
 public:
  SlowRelay(int upstream, std::chrono::milliseconds delay) : upstream_(upstream), delay_(delay) {
    listen_fd_ = ListenLoopback(&port_);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~SlowRelay() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> l(mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
    close(listen_fd_);
  }
  int port() const { return port_; }
  int connections() const { return connections_; }  // HTTP/2 clients only

 private:
  void Accept() {
    while (!stop_) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ConnectLoopback(upstream_);
      const auto release_at = std::chrono::steady_clock::now() + delay_;
      std::lock_guard<std::mutex> l(mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      pumps_.emplace_back([this, client, server] { Pump(client, server, {}, &connections_); });
      pumps_.emplace_back(
          [client, server, release_at] { Pump(server, client, release_at, nullptr); });
    }
  }
  // Copies from `from` to `to` until either side closes; nothing before `release_at`. With
  // `http2_clients`, counts the connection there if its first bytes are an HTTP/2 client's: a
  // connection from another process (a test probing a port it expects to be free that the
  // kernel gave this relay) is not the channel's.
  static void Pump(int from, int to, std::chrono::steady_clock::time_point release_at,
                   std::atomic<int>* http2_clients) {
    static constexpr char kPreface[] = "PRI * HTTP/2.0";
    char buf[16384];
    for (bool first = true;; first = false) {
      const ssize_t n = read(from, buf, sizeof(buf));
      if (n <= 0) break;
      if (first && http2_clients != nullptr && n >= static_cast<ssize_t>(sizeof(kPreface) - 1) &&
          memcmp(buf, kPreface, sizeof(kPreface) - 1) == 0) {
        ++*http2_clients;
      }
      std::this_thread::sleep_until(release_at);
      // MSG_NOSIGNAL: a side closed at the end of the test (the server's shutdown) ends the pump
      // instead of killing the test with SIGPIPE.
      if (send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    shutdown(to, SHUT_RDWR);
    shutdown(from, SHUT_RDWR);
  }

  const int upstream_;
  const std::chrono::milliseconds delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
};

// Answers every call UNIMPLEMENTED: a server that is there, with nothing to serve.
class NothingService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Refuse final : public grpc::ServerGenericBidiReactor {
     public:
      Refuse() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "nothing here")); }
      void OnDone() override { delete this; }
    };
    return new Refuse();
  }
};

// A connection that takes 2.5 s to complete still connects: before, an attempt was cut off
// after at most the 1 s reconnect backoff and begun again, so a peer that slow was never
// reached (the call ran into its deadline over a chain of abandoned connections).
TEST(PeerChannelTest, ConnectionSlowerThanTheReconnectBackoffStillCompletes) {
  NothingService nothing;
  grpc::ServerBuilder builder;
  int server_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &server_port);
  builder.RegisterCallbackGenericService(&nothing);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  SlowRelay relay(server_port, std::chrono::milliseconds(2500));

  grpc::GenericStub stub(
      PeerChannel("127.0.0.1:" + std::to_string(relay.port()), /*server_role=*/"datanode"));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(9));
  grpc::Slice payload("x", 1);
  grpc::ByteBuffer request(&payload, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/ringcache.test.Nothing/Call", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(s); });
  const grpc::Status s = done.get_future().get();
  // UNIMPLEMENTED comes from the server: the connection was made. DEADLINE_EXCEEDED or
  // UNAVAILABLE would mean every attempt was abandoned.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
  EXPECT_EQ(relay.connections(), 1) << "connection attempts were abandoned and begun again";
  server->Shutdown();
}

}  // namespace
}  // namespace ringcache
