// The parts of EtcdClient that its .cc files share and its users never see: an endpoint's channel
// and generated stubs, and one attempt of a call. Included by etcd_client.cc and etcd_auth.cc only.
#ifndef RINGCACHE_MEMBERSHIP_ETCD_CLIENT_INTERNAL_H_
#define RINGCACHE_MEMBERSHIP_ETCD_CLIENT_INTERNAL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "membership/etcd_client.h"

namespace ringcache::membership {

struct EtcdClient::Endpoint {
  std::string target;  // host:port
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<::etcdserverpb::KV::Stub> kv;
  std::unique_ptr<::etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<::etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<::etcdserverpb::Auth::Stub> auth;
  std::unique_ptr<::etcdserverpb::Maintenance::Stub> maintenance;
};

// One attempt of a unary call: its context (deadline set by Call) and a label for errors.
struct EtcdClient::Attempt {
  grpc::ClientContext ctx;
  std::string what;  // "<operation> at <endpoint>"
};

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_ETCD_CLIENT_INTERNAL_H_
