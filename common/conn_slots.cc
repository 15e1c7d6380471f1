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

bool ConnectionSlots::ReserveBytes(const std::string& peer, uint64_t charge, uint64_t max_bytes,
                                   absl::Duration wait) {
  absl::MutexLock l(&mu_);
  auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = peer_bytes_.find(peer);
    const uint64_t held = it == peer_bytes_.end() ? 0 : it->second;
    return held == 0 || held + charge <= max_bytes;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&room), wait)) return false;
  peer_bytes_[peer] += charge;
  bytes_ += charge;
  return true;
}

void ConnectionSlots::ReleaseBytes(const std::string& peer, uint64_t charge) {
  absl::MutexLock l(&mu_);
  auto it = peer_bytes_.find(peer);
  if (it == peer_bytes_.end()) return;
  const uint64_t back = std::min(charge, it->second);
  it->second -= back;
  bytes_ -= back;
  if (it->second == 0) peer_bytes_.erase(it);
}

uint64_t ConnectionSlots::bytes() const {
  absl::MutexLock l(&mu_);
  return bytes_;
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
