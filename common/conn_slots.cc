// Connection admission in total and per peer: see conn_slots.h.
#include "common/conn_slots.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

namespace ringcache {

ConnectionSlots::ConnectionSlots(int max_total, int max_per_peer)
    : max_total_(max_total),
      max_per_peer_(max_per_peer > 0 ? max_per_peer : std::max(1, max_total / 2)) {}

ConnectionSlots::Refusal ConnectionSlots::Take(const std::string& peer) {
  absl::MutexLock l(&mu_);
  if (total_ >= max_total_) return Refusal::kTotal;
  int& mine = per_peer_[peer];
  if (mine >= max_per_peer_) return Refusal::kPeer;
  ++mine;
  ++total_;
  return Refusal::kNone;
}

void ConnectionSlots::Give(const std::string& peer) {
  absl::MutexLock l(&mu_);
  auto it = per_peer_.find(peer);
  if (it == per_peer_.end()) return;
  --total_;
  if (--it->second <= 0) per_peer_.erase(it);
}

int ConnectionSlots::total() const {
  absl::MutexLock l(&mu_);
  return total_;
}

std::string PeerAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof(host));
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, host, sizeof(host));
  }
  return host;
}

std::string PeerAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return PeerAddress(ss);
}

}  // namespace ringcache
