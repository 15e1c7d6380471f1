// NbdServer: the gateway's NBD front end. Accepts TCP connections, runs the fixed newstyle
// handshake (nbd_protocol.h) against an ExportProvider, then serves the chosen export's
// BlockDevice with many requests in flight per connection and replies sent as they complete.
//
// TLS: NBD_OPT_STARTTLS upgrades a connection in the handshake (config.tls); from then on every
// byte, transmission included, goes through its TLS session.
//
// Threads: one acceptor; per connection a reader (handshake, then request headers and WRITE
// payloads) and a writer (drains that connection's reply queue, so a worker never blocks on a
// slow or hostile client's socket); one shared worker pool that calls the BlockDevice, with a
// lane per export (common/task_pool.h) so that one stuck VDI cannot take every worker.
// Back-pressure: a connection may hold at most max_inflight_requests requests and
// max_inflight_bytes bytes (WRITE payloads read, READ data not yet sent), and the connections of
// one address together max_inflight_bytes_per_peer; beyond that a reader stops reading the
// socket, so the client's TCP window fills and it alone waits.
//
// Thread-safety: Start/Stop are called from one owner thread; everything else is internal.
#ifndef RINGCACHE_GATEWAY_NBD_SERVER_H_
#define RINGCACHE_GATEWAY_NBD_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/conn_slots.h"
#include "common/metrics.h"
#include "common/task_pool.h"
#include "common/tls.h"
#include "gateway/block_device.h"
#include "gateway/nbd_protocol.h"

namespace ringcache::gateway {

struct NbdServerConfig {
  // host:port to listen on; port 0 picks a free port (see NbdServer::Start()).
  std::string listen = "127.0.0.1:10809";
  // Connections beyond this in total, or beyond max_connections_per_peer from one address
  // (0: half of max_connections), are closed right after accept(), counted in
  // ringcache_nbd_connections_rejected_total{limit="total"|"peer"} and logged: one host cannot
  // hold every slot.
  int max_connections = 256;
  int max_connections_per_peer = 0;
  // Threads calling the BlockDevice, shared by all connections: worker_threads are kept, more
  // start on demand up to max_worker_threads. One export (VDI) runs at most vdi_worker_limit
  // requests at once, however many connections it has; its others wait their turn. So requests
  // stuck on one VDI (a hung cache node behind it) hold a bounded share of the workers, and
  // every other VDI still gets threads.
  int worker_threads = 32;
  int max_worker_threads = 512;
  int vdi_worker_limit = 32;
  // Per-connection back-pressure limits.
  uint32_t max_inflight_requests = 64;
  uint64_t max_inflight_bytes = 128ull << 20;
  // The same bytes summed over every connection from one address: many connections from one
  // host share this (beyond it their readers wait), so one host cannot make the gateway hold
  // max_connections_per_peer times max_inflight_bytes. At least max_inflight_bytes.
  uint64_t max_inflight_bytes_per_peer = 512ull << 20;
  // Largest READ/WRITE/CACHE length accepted (NBD_EINVAL beyond; a WRITE beyond it also closes the
  // connection, since its payload is never read). At most nbd::kMaxPayloadLength (32 MiB).
  uint32_t max_payload = nbd::kMaxPayloadLength;
  // Handshake limits (see nbd::HandshakeOptions).
  uint32_t max_option_length = 64 * 1024;
  uint32_t max_options = 4096;
  // A client that has not finished the handshake by then is disconnected.
  int handshake_timeout_ms = 10000;
  // A request header or WRITE payload that started arriving must be complete by then, or the
  // connection is closed (a byte a second holds no slot for long: slowloris).
  int request_timeout_ms = 30000;
  // A connection with no request for this long is closed (0: never). Off by default: an idle
  // VM's disk sends nothing for hours, and qemu does not reconnect unless told to
  // (reconnect-delay); per-peer caps bound what idle connections can hold.
  int idle_timeout_ms = 0;
  // A reply that cannot be sent for this long breaks the connection (SO_SNDTIMEO).
  int send_timeout_ms = 30000;
  // Stop() lets in-flight requests finish for this long before forcing connections closed.
  int stop_grace_ms = 5000;
  // Whether BlockDevice::WriteZeroes(may_trim=true) is cheaper than writing zeroes. When true,
  // a WRITE_ZEROES with NBD_CMD_FLAG_FAST_ZERO (and without NO_HOLE) is performed; otherwise such
  // requests fail at once with NBD_ENOTSUP, as the protocol asks. NBD_FLAG_SEND_FAST_ZERO is
  // advertised either way.
  bool fast_zero = true;
  // Most base:allocation descriptors in one BLOCK_STATUS reply.
  uint32_t max_block_status_descriptors = 1024;
  // NBD_OPT_STARTTLS (nbd_protocol.h TlsMode) with the server credentials of `tls_context`
  // (certificate and/or PSK; client certificates as its options say). REQUIRES: tls_context
  // unless tls is kOff.
  nbd::TlsMode tls = nbd::TlsMode::kOff;
  std::shared_ptr<const tls::ServerContext> tls_context;

  // Returns kInvalidArgument naming the first bad field.
  absl::Status Validate() const;
};

class NbdServer {
 public:
  // `exports` (not owned) must outlive the server. `registry` (not owned) receives the
  // ringcache_nbd_* metrics, per VDI; null means metrics::Registry::Default().
  NbdServer(NbdServerConfig config, ExportProvider* exports, metrics::Registry* registry);
  ~NbdServer();  // Stop()s
  NbdServer(const NbdServer&) = delete;
  NbdServer& operator=(const NbdServer&) = delete;

  // Validates the config, binds, listens and starts serving. Returns the bound port.
  absl::StatusOr<int> Start();
  // Stops accepting, stops reading requests, ends every connection once its in-flight requests
  // are answered (clients still in the handshake are disconnected; an option already arriving is
  // answered NBD_REP_ERR_SHUTDOWN), forces sockets closed after stop_grace_ms, then joins all
  // threads. A BlockDevice call that never returns keeps Stop() waiting. Idempotent.
  void Stop();

  // The export `name` was deleted: its ringcache_nbd_* series (and any other series of the
  // registry labelled vdi="<name>") leave /metrics now, or when its last connection closes.
  void ForgetExport(const std::string& name);

  int port() const { return port_; }
  // Returns the number of open client connections.
  int active_connections() const { return slots_.total(); }
  // Returns how many connection readers are waiting for in-flight budget (back-pressure).
  int AdmissionWaitsForTest() const { return admission_waits_.load(); }

  class Connection;  // one client connection (defined in nbd_server.cc)
  struct Metrics;

 private:
  void AcceptLoop();
  // Joins and drops connections whose threads have finished.
  void Reap(bool all) ABSL_LOCKS_EXCLUDED(mu_);

  const NbdServerConfig config_;
  ExportProvider* const exports_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<TaskPool> pool_;  // shared pool of device-calling threads
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd that wakes the acceptor on Stop()
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  ConnectionSlots slots_;
  uint64_t rejections_ = 0;  // acceptor thread; logged at the 1st, 2nd, 4th...: a flood writes
                             // few lines
  std::atomic<int> admission_waits_{0};
  bool started_ = false;
  bool stopped_ = false;
  std::thread acceptor_;
  absl::Mutex mu_;
  std::list<std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_NBD_SERVER_H_
