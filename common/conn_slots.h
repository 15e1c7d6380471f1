// ConnectionSlots: who may open one more connection to a server — at most `max_total` at once,
// and at most `max_per_peer` from any one address, so that one host cannot hold every slot and
// shut the others out. The NBD listener (gateway/nbd_server.h) and ConnectionServer (the block
// data port, the HTTPS front of /metrics) admit their connections through it.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_COMMON_CONN_SLOTS_H_
#define RINGCACHE_COMMON_CONN_SLOTS_H_

#include <sys/socket.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringcache {

class ConnectionSlots {
 public:
  enum class Refusal { kNone, kTotal, kPeer };

  // `max_per_peer` 0: half of `max_total`, at least 1.
  ConnectionSlots(int max_total, int max_per_peer);

  // Takes a slot for a connection from `peer` (an address, no port), or says which limit is
  // reached.
  Refusal Take(const std::string& peer);
  // Gives back the slot a connection from `peer` took.
  void Give(const std::string& peer);

  int total() const;

  // Memory of requests in flight, per peer (the bytes a server holds for them: payloads read,
  // answers not yet sent). Reserves `charge` bytes of `peer`'s `max_bytes`, waiting up to `wait`
  // for room; false when there was none by then (the caller retries or gives up). A peer that
  // holds nothing is always admitted, so one request larger than the budget still runs.
  bool ReserveBytes(const std::string& peer, uint64_t charge, uint64_t max_bytes,
                    absl::Duration wait);
  void ReleaseBytes(const std::string& peer, uint64_t charge);
  // Bytes reserved by every peer together.
  uint64_t bytes() const;
  int max_total() const { return max_total_; }
  int max_per_peer() const { return max_per_peer_; }
  // "total" or "peer": the label of a refusal in the metrics.
  static const char* Name(Refusal r) { return r == Refusal::kPeer ? "peer" : "total"; }

 private:
  const int max_total_;
  const int max_per_peer_;
  mutable absl::Mutex mu_;
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> per_peer_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> peer_bytes_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// The address of a socket address, without its port ("127.0.0.1", "::1"); "?" when unknown.
std::string PeerAddress(const sockaddr_storage& ss);
// The address of the peer of connected socket `fd`.
std::string PeerAddressOf(int fd);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_CONN_SLOTS_H_
