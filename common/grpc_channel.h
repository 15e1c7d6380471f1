// Channel settings shared by every ringcache gRPC client (cache node -> data node, gateway ->
// cache node). Header-only; include only from code that links gRPC.
#ifndef RINGCACHE_COMMON_GRPC_CHANNEL_H_
#define RINGCACHE_COMMON_GRPC_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace ringcache {

// Returns an insecure channel to a ringcache peer: 64 MiB messages (a whole object plus framing)
// and fast reconnects after the peer restarts (gRPC's default backoff grows to minutes).
inline std::shared_ptr<grpc::Channel> PeerChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_GRPC_CHANNEL_H_
