// Internal to the gateway's NBD server (nbd_server.cc, nbd_connection.cc): the per-export
// metrics and the connection that runs one client's handshake and transmission phase.
//
// Thread-safety: as documented on each member; see nbd_server.h for the threading model.
#ifndef RINGCACHE_GATEWAY_NBD_CONNECTION_H_
#define RINGCACHE_GATEWAY_NBD_CONNECTION_H_

#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/socket.h"
#include "common/stream_reader.h"
#include "gateway/nbd_server.h"

namespace ringcache::gateway {

using nbd::Request;

// ---- Metrics ------------------------------------------------------------------------------------

struct NbdServer::Metrics {
  static constexpr int kCommands = 9;  // NBD_CMD_READ..NBD_CMD_BLOCK_STATUS, then "unknown"
  static constexpr int kResults = 9;
  static constexpr uint32_t kResultErrno[kResults] = {0,
                                                      nbd::kEperm,
                                                      nbd::kEio,
                                                      nbd::kEnomem,
                                                      nbd::kEinval,
                                                      nbd::kEnospc,
                                                      nbd::kEoverflow,
                                                      nbd::kEnotsup,
                                                      nbd::kEshutdown};

  // The series of one export (VDI): requests, bytes and latency, labelled vdi="<name>". Shared by
  // the connections serving it; dropped from the registry once the VDI is deleted and its last
  // connection has closed (ForgetExport).
  struct Vdi {
    std::string name;
    std::atomic<metrics::Counter*> requests[kCommands][kResults];
    metrics::Histogram* duration[kCommands - 1] = {};
    metrics::Counter* bytes_read = nullptr;
    metrics::Counter* bytes_written = nullptr;
    int users = 0;           // connections serving it; guarded by Metrics::mu
    bool forgotten = false;  // deleted while in use; guarded by Metrics::mu
  };

  explicit Metrics(metrics::Registry* r) : registry(r) {
    connections = registry->GetGauge("ringcache_nbd_connections", "Open NBD client connections.");
    accepted = registry->GetCounter("ringcache_nbd_connections_accepted_total",
                                    "NBD connections accepted.");
    const char* rejected_help =
        "NBD connections closed at once: max_connections open in all (limit=total), or "
        "max_connections_per_peer from the client's address (limit=peer).";
    rejected_total = registry->GetCounter("ringcache_nbd_connections_rejected_total", rejected_help,
                                          {{"limit", "total"}});
    rejected_peer = registry->GetCounter("ringcache_nbd_connections_rejected_total", rejected_help,
                                         {{"limit", "peer"}});
    inflight_bytes = registry->GetGauge(
        "ringcache_nbd_inflight_bytes",
        "Bytes the gateway holds for NBD requests in flight (payloads read, answers not sent).");
    peer_memory_waits = registry->GetCounter(
        "ringcache_nbd_peer_memory_waits_total",
        "NBD requests whose reading waited because the connections of their client's address "
        "held max_inflight_bytes_per_peer.");
  }

  // Returns the series of export `name` for a new connection; Release() it when the connection
  // ends.
  Vdi* Acquire(const std::string& name) {
    absl::MutexLock l(&mu);
    std::unique_ptr<Vdi>& v = vdis[name];
    if (!v) {
      v = std::make_unique<Vdi>();
      v->name = name;
      for (int c = 0; c < kCommands; ++c) {
        for (int e = 0; e < kResults; ++e) v->requests[c][e].store(nullptr);
      }
      const metrics::Labels vdi{{"vdi", name}};
      for (int c = 0; c < kCommands - 1; ++c) {
        Counter(v.get(), c, 0);            // pre-create the "ok" series so dashboards see zeros
        if (c == nbd::kCmdDisc) continue;  // has no reply, so no latency
        v->duration[c] = registry->GetHistogram(
            "ringcache_nbd_request_duration_seconds",
            "Time from a request being read to its reply being queued, by VDI and NBD command "
            "(requests rejected before execution are not timed).",
            {{"vdi", name}, {"command", nbd::CommandName(static_cast<uint16_t>(c))}});
      }
      const char* bytes_help =
          "Bytes of NBD data by VDI: read = sent to clients by READ, write = received from "
          "clients by WRITE.";
      v->bytes_read = registry->GetCounter("ringcache_nbd_bytes_total", bytes_help,
                                           {{"vdi", name}, {"direction", "read"}});
      v->bytes_written = registry->GetCounter("ringcache_nbd_bytes_total", bytes_help,
                                              {{"vdi", name}, {"direction", "write"}});
    }
    v->forgotten = false;  // a VDI of that name exists (again)
    ++v->users;
    return v.get();
  }

  void Release(Vdi* v) {
    absl::MutexLock l(&mu);
    if (--v->users == 0 && v->forgotten) Drop(v->name);
  }

  // The VDI `name` was deleted: its series go now, or when its last connection ends.
  void Forget(const std::string& name) {
    absl::MutexLock l(&mu);
    auto it = vdis.find(name);
    if (it == vdis.end()) {
      registry->RemoveSeries({{"vdi", name}});  // none of ours; other components' series of it
      return;
    }
    if (it->second->users == 0) {
      Drop(name);
    } else {
      it->second->forgotten = true;
    }
  }

  void Drop(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    registry->RemoveSeries({{"vdi", name}});
    vdis.erase(name);
  }

  static int CommandIndex(uint16_t type) { return type < kCommands - 1 ? type : kCommands - 1; }
  static int ResultIndex(uint32_t error) {
    for (int i = 0; i < kResults; ++i) {
      if (kResultErrno[i] == error) return i;
    }
    return 2;  // unnamed errors are reported as EIO
  }

  metrics::Counter* Counter(Vdi* v, int command, int result) {
    metrics::Counter* c = v->requests[command][result].load(std::memory_order_acquire);
    if (c == nullptr) {
      // GetCounter is idempotent, so racing threads store the same pointer.
      c = registry->GetCounter("ringcache_nbd_requests_total",
                               "NBD requests answered, by VDI, command and result.",
                               {{"vdi", v->name},
                                {"command", nbd::CommandName(static_cast<uint16_t>(command))},
                                {"result", nbd::ErrnoName(kResultErrno[result])}});
      v->requests[command][result].store(c, std::memory_order_release);
    }
    return c;
  }

  // Counts an answered request; `seconds` < 0 means "rejected before execution, not timed".
  void Request(Vdi* v, uint16_t type, uint32_t error, double seconds) {
    const int c = CommandIndex(type);
    Counter(v, c, ResultIndex(error))->Increment();
    if (seconds >= 0 && c < kCommands - 1 && v->duration[c] != nullptr) {
      v->duration[c]->Observe(seconds);
    }
  }

  void ProtocolError(const char* reason) {
    registry
        ->GetCounter("ringcache_nbd_protocol_errors_total",
                     "NBD connections ended because the client broke the protocol, by reason.",
                     {{"reason", reason}})
        ->Increment();
  }

  metrics::Registry* const registry;
  metrics::Gauge* connections;
  metrics::Counter* accepted;
  metrics::Counter* rejected_total;
  metrics::Counter* rejected_peer;
  metrics::Gauge* inflight_bytes;
  metrics::Counter* peer_memory_waits;
  absl::Mutex mu;
  std::map<std::string, std::unique_ptr<Vdi>> vdis ABSL_GUARDED_BY(mu);
};

// ---- Socket helpers
// --------------------------------------------------------------------------------

// ---- Connection
// --------------------------------------------------------------------------------------

class NbdServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(int fd, std::string peer, const NbdServerConfig* config, ExportProvider* exports,
             Metrics* metrics, TaskPool* pool, const std::atomic<bool>* stopping,
             ConnectionSlots* slots, std::string address, std::atomic<int>* admission_waits)
      : fd_(fd),
        peer_(std::move(peer)),
        config_(config),
        exports_(exports),
        metrics_(metrics),
        pool_(pool),
        stopping_(stopping),
        slots_(slots),
        address_(std::move(address)),
        admission_waits_(admission_waits) {}

  ~Connection() {
    if (reader_.joinable()) reader_.join();
    CloseSocket();
  }

  // Starts the reader thread. The server keeps a reference until Join() has returned.
  void Start() {
    metrics_->connections->Increment();
    reader_ = std::thread([this] { Run(); });
  }
  void Join() {
    if (reader_.joinable()) reader_.join();
  }
  bool finished() const { return finished_.load(); }

  // Stops reading requests; in-flight ones are still answered.
  void BeginStop() { ShutdownSocket(SHUT_RD); }
  // Breaks the connection both ways (in-flight replies are dropped).
  void ForceClose() { ShutdownSocket(SHUT_RDWR); }

 private:
  struct OutMsg {
    std::string header;
    std::unique_ptr<char[]> data;
    uint32_t data_len = 0;
    uint64_t charge = 0;  // bytes returned to the in-flight budget once sent
  };

  // Whether no request is in flight (the idle timeout counts only then).
  // Since when the connection has had nothing to do: its last reply left (or it started);
  // InfiniteFuture while requests are in flight. The idle timeout counts from here, so a
  // request that ran long does not count as idle time.
  absl::Time QuietSince() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock l(&mu_);
    return inflight_requests_ == 0 ? last_reply_ : absl::InfiniteFuture();
  }
  void Run();
  bool Handshake();
  void Transmit();
  // Waits for the next request header in `in`; false when the connection ends (the peer
  // closed, or it was too slow or idle: logged and counted).
  bool NextHeader(StreamReader* in);
  bool Admit(uint64_t charge);
  // Gives `charge` bytes back to the address's share (Admit took them).
  void ReleasePeerBytes(uint64_t charge);
  void Execute(const Request& req, std::unique_ptr<char[]> payload, uint64_t charge,
               absl::Time start);
  // Starts a READ on the device's asynchronous path (BlockDevice::ReadAsync), which answers it
  // from the device's completion thread without a worker; false when the device has none for
  // it. A failed asynchronous read is done again by a worker (Execute), whose device call
  // retries and re-routes.
  bool StartAsyncRead(const Request& req, uint64_t charge, absl::Time start);
  // The successful reply to READ `req` (its data in msg->data) and its accounting.
  void AppendReadReply(const Request& req, OutMsg* msg);
  void AppendReply(const Request& req, uint32_t error, const std::string& message,
                   const std::vector<nbd::BlockStatusDescriptor>& descriptors, OutMsg* msg);
  void QueueError(const Request& req, uint32_t error, const std::string& message, uint64_t charge);
  void Enqueue(OutMsg msg);
  // The connection's byte stream: the socket, or its TLS session once STARTTLS succeeded. The
  // handshake reads exactly what each option needs (nothing of a TLS record may be read as
  // plaintext); the transmission phase reads through a StreamReader (common/stream_reader.h):
  // one receive takes every request the client pipelined.
  bool SendBytes(const std::string& bytes);
  bool SendV(iovec* iov, int count);
  // Runs the TLS handshake after NBD_OPT_STARTTLS was acknowledged.
  bool StartTls(nbd::ServerHandshake* hs, absl::Time deadline);
  // Whether `bytes` fit in the socket's send buffer now (a send would not block).
  bool SocketHasRoom(size_t bytes) const;
  // Sends the replies (nothing if `broken`) and returns their budget. REQUIRES: mu_ not held,
  // this thread set sending_.
  void SendBatch(std::vector<OutMsg>* batch, bool broken);
  void WriterLoop();

  void ShutdownSocket(int how) {
    absl::MutexLock l(&fd_mu_);
    if (fd_ >= 0) ::shutdown(fd_, how);
  }
  void CloseSocket() {
    absl::MutexLock l(&fd_mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The socket. Read by the reader thread and written by one thread at a time (sending_: the
  // writer, or a worker sending its own reply) without fd_mu_: the descriptor only changes
  // (closes) in CloseSocket(), after every reply was sent.
  // fd_mu_ guards it against Stop()'s shutdown() racing with that close.
  int fd_;
  absl::Mutex fd_mu_;
  const std::string peer_;
  const NbdServerConfig* const config_;
  ExportProvider* const exports_;
  Metrics* const metrics_;
  TaskPool* const pool_;
  const std::atomic<bool>* const stopping_;
  ConnectionSlots* const slots_;
  const std::string address_;  // the client's address, without the port: its slot
  std::atomic<int>* const admission_waits_;
  nbd::Session session_;  // written by the reader before any worker or the writer starts
  // The TLS session after STARTTLS; set by the reader in the handshake, before any worker or
  // the writer starts, and gone with the connection.
  std::unique_ptr<tls::Session> tls_;
  Metrics::Vdi* vdi_ = nullptr;  // the export's series; set with session_
  std::thread reader_;
  std::thread writer_;
  std::atomic<bool> finished_{false};

  absl::Mutex mu_;
  std::deque<OutMsg> queue_ ABSL_GUARDED_BY(mu_);
  uint32_t inflight_requests_ ABSL_GUARDED_BY(mu_) = 0;  // admitted, reply not yet sent
  uint64_t inflight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_reply_ ABSL_GUARDED_BY(mu_) = absl::Now();  // or the handshake's end
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // a send failed; replies are dropped
  bool writer_stop_ ABSL_GUARDED_BY(mu_) = false;
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // a thread is writing replies to the socket
  int sndbuf_ = 0;                             // SO_SNDBUF, read once at the start
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_NBD_CONNECTION_H_
