// Channel settings shared by every ringcache gRPC client (cache node -> data node, gateway ->
// cache node). Header-only; include only from code that links gRPC.
#ifndef RINGCACHE_COMMON_GRPC_CHANNEL_H_
#define RINGCACHE_COMMON_GRPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "common/grpc_tls.h"

namespace ringcache {

// Keepalive pings of the gateway's channels to cache nodes: a connection whose peer vanished
// (cut off, or its host gone) is noticed within about kPeerKeepaliveMs * 2 instead of the TCP
// retransmission timeout (15-45 s), so a node that comes back is reachable again at once.
inline constexpr int kPeerKeepaliveMs = 2000;
// Keepalive pings of a cache node's channels to data nodes, slower: an idle connection whose peer
// vanished (its host cut off the network, then back with another address) is closed within
// about 20 s, so that the first request after the cut does not wait its whole deadline on a dead
// connection (seen: a log append that hung 30 s after a cache node's network came back).
inline constexpr int kDataNodeKeepaliveMs = 10000;

// How long one connection attempt (TCP, TLS handshake, HTTP/2 settings) may take. gRPC reads it
// from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: an attempt's deadline is the later of its backoff
// deadline and now + this. At 100 ms (with backoffs of at most 1 s) a TLS handshake slower than
// about a second was cut off and started again, forever: on a loaded machine a cache node could
// not reach a data node for two minutes ("Handshake timed out") and gave up. Reconnecting stays
// fast: a refused connection (the peer restarting) fails at once and is retried after 0.1-1 s.
inline constexpr int kPeerConnectTimeoutMs = 10000;

// Fast reconnects (gRPC's default backoff grows to two minutes) with a connection attempt
// allowed kPeerConnectTimeoutMs; for every ringcache client channel, etcd's included.
inline void SetReconnectArgs(grpc::ChannelArguments* args) {
  args->SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args->SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kPeerConnectTimeoutMs);
  args->SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
}

// Returns a channel to a ringcache peer whose role is `server_role` (tls::kRoleCacheNode, ...):
// mutual TLS when the process has a TLS identity (common/grpc_tls.h), else plaintext; 64 MiB messages (a whole object plus framing),
// fast reconnects after the peer restarts (gRPC's default backoff grows to minutes), and up to 3
// tries of a data node read that failed UNAVAILABLE. With
// `keepalive_ms` > 0, it pings the peer that often, also while idle; the peer's server must
// accept that (AllowPeerKeepalive), or it closes the connection after a few pings.
inline std::shared_ptr<grpc::Channel> PeerChannel(const std::string& address,
                                                  const std::string& server_role,
                                                  int keepalive_ms = 0) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  SetReconnectArgs(&args);
  if (keepalive_ms > 0) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, keepalive_ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  // Reads of a data node change nothing, so a read whose connection broke under it (a stale
  // connection after a network cut: "connection reset by peer") is tried again at once on a fresh
  // one instead of failing the client's read.
  args.SetServiceConfigJSON(R"({"methodConfig": [{
      "name": [{"service": "ringcache.v1.DataNode", "method": "ReadBlocks"}],
      "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.05s", "maxBackoff": "0.5s",
                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]})");
  return grpc::CreateCustomChannel(address, tls::ChannelCredentialsFor(server_role), args);
}

// Every ringcache server owns its port: without this gRPC sets SO_REUSEPORT, so a second daemon
// started on the same port would not fail but take a share of the connections.
inline void ExclusivePort(grpc::ServerBuilder* b) {
  b->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

// A synchronous gRPC server keeps at most MAX_POLLERS idle threads (2 by default) and ends every
// thread beyond them as its call returns, so a node that serves a few more calls at once than
// that creates and ends a thread for nearly every call (550 threads in 3 s under a read load
// beside a rebalance, each start a scheduling delay for the call). The data path's servers keep
// up to `idle` threads waiting instead.
inline void KeepServerThreads(grpc::ServerBuilder* b, int idle = 16) {
  b->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  b->SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, idle);
}

// Server side of PeerChannel(keepalive): accept a ping every kPeerKeepaliveMs / 2 or slower,
// also without calls, without ever closing the connection for it.
inline void AllowPeerKeepalive(grpc::ServerBuilder* b) {
  b->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                        kPeerKeepaliveMs / 2);
  b->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_GRPC_CHANNEL_H_
