// The gRPC implementation of CacheClient (the in-process one is tools/local/local_cache_client.h).
#include "gateway/cache_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"
#include "common/formats.h"
#include "common/grpc_channel.h"
#include "common/socket.h"
#include "gateway/data_channel.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"

namespace ringcache::gateway {
namespace {

bool UseDataPath() {
  const char* t = std::getenv("RINGCACHE_BLOCK_TRANSPORT");
  return t == nullptr || std::string(t) != "grpc";
}

class GrpcCacheClient : public CacheClient {
 public:
  GrpcCacheClient(const std::string& address, int timeout_ms)
      : address_(address), timeout_ms_(timeout_ms) {
    rpc_ = NewRpc();
  }

  absl::Status Read(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                    char* out) override {
    if (std::optional<absl::Status> fast =
            OverDataPath({wire::Op::kRead, vdi, object, offset, len}, nullptr, out, "read")) {
      return *fast;
    }
    v1::CacheReadRequest req = Range(vdi, object, offset, len);
    v1::CacheReadResponse resp;
    auto ctx = Ctx();
    absl::Status s = FromGrpc(Rpc()->stub->Read(ctx.get(), req, &resp), What("read"));
    if (!s.ok()) return s;
    if (resp.data().size() != len) return absl::DataLossError(What("short read"));
    std::memcpy(out, resp.data().data(), len);
    return absl::OkStatus();
  }
  bool ReadAsync(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len, char* out,
                 absl::AnyInvocable<void(absl::Status)> done) override {
    std::shared_ptr<DataChannel> ch;
    {
      absl::MutexLock l(&data_mu_);
      ch = data_;
    }
    if (ch == nullptr) return false;
    wire::Request r{wire::Op::kRead, vdi, object, offset, len};
    r.epoch = ring_epoch();
    r.timeout_ms = static_cast<uint32_t>(timeout_ms_);
    return ch->ReadAsync(r, out, [this, done = std::move(done)](absl::Status s) mutable {
      done(s.ok() ? s : Annotate(s, absl::StrCat(What("read"), ": ")));
    });
  }
  absl::Status Write(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                     const char* data) override {
    if (std::optional<absl::Status> fast =
            OverDataPath({wire::Op::kWrite, vdi, object, offset, len}, data, nullptr, "write")) {
      return *fast;
    }
    v1::CacheWriteRequest req;
    req.set_vdi_id(vdi);
    req.set_object_index(object);
    req.set_offset(offset);
    req.set_data(data, len);
    req.set_epoch(ring_epoch());
    v1::CacheWriteResponse resp;
    auto ctx = Ctx();
    return FromGrpc(Rpc()->stub->Write(ctx.get(), req, &resp), What("write"));
  }
  absl::Status Trim(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                    bool zero) override {
    const wire::Op op = zero ? wire::Op::kZero : wire::Op::kTrim;
    if (std::optional<absl::Status> fast =
            OverDataPath({op, vdi, object, offset, len}, nullptr, nullptr, "trim")) {
      return *fast;
    }
    v1::CacheTrimRequest req;
    req.set_vdi_id(vdi);
    req.set_object_index(object);
    req.set_offset(offset);
    req.set_length(len);
    req.set_zero(zero);
    req.set_epoch(ring_epoch());
    v1::CacheTrimResponse resp;
    auto ctx = Ctx();
    return FromGrpc(Rpc()->stub->Trim(ctx.get(), req, &resp), What("trim"));
  }
  absl::Status Prefetch(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len) override {
    v1::PrefetchResponse resp;
    auto ctx = Ctx();
    return FromGrpc(Rpc()->stub->Prefetch(ctx.get(), Range(vdi, object, offset, len), &resp),
                    What("prefetch"));
  }
  absl::Status Allocation(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                          std::vector<bool>* allocated) override {
    v1::AllocationResponse resp;
    auto ctx = Ctx();
    absl::Status s = FromGrpc(
        Rpc()->stub->Allocation(ctx.get(), Range(vdi, object, offset, len), &resp), What("status"));
    allocated->assign(resp.allocated().begin(), resp.allocated().end());
    return s;
  }
  absl::Status RegisterVdi(const v1::VdiGeometry& vdi, v1::CacheMode mode,
                           const std::string& policy) override {
    v1::RegisterVdiRequest req;
    *req.mutable_vdi() = vdi;
    req.set_mode(mode);
    req.set_policy(policy);
    v1::RegisterVdiResponse resp;
    auto ctx = Ctx();
    return FromGrpc(Rpc()->stub->RegisterVdi(ctx.get(), req, &resp), What("register VDI"));
  }
  absl::Status DropVdi(uint32_t vdi) override {
    v1::DropVdiRequest req;
    req.set_vdi_id(vdi);
    v1::DropVdiResponse resp;
    auto ctx = Ctx();
    return FromGrpc(Rpc()->stub->DropVdi(ctx.get(), req, &resp), What("drop VDI"));
  }
  absl::StatusOr<Invalidated> InvalidateVdi(uint32_t vdi) override {
    v1::InvalidateVdiRequest req;
    req.set_vdi_id(vdi);
    v1::InvalidateVdiResponse resp;
    auto ctx = Ctx();
    RC_RETURN_IF_ERROR(
        FromGrpc(Rpc()->stub->InvalidateVdi(ctx.get(), req, &resp), What("invalidate VDI")));
    return Invalidated{resp.dropped_blocks(), resp.dirty_blocks_kept()};
  }
  absl::Status SetMode(uint32_t vdi, v1::CacheMode mode) override {
    v1::SetModeRequest req;
    req.set_vdi_id(vdi);
    req.set_mode(mode);
    v1::SetModeResponse resp;
    auto ctx = Ctx(3600 * 1000, kNoWait);  // leaving write-back destages first
    return FromGrpc(Rpc()->stub->SetMode(ctx.get(), req, &resp), What("set mode"));
  }
  absl::Status SetPolicy(uint32_t vdi, const std::string& policy) override {
    v1::SetPolicyRequest req;
    req.set_vdi_id(vdi);
    req.set_policy(policy);
    v1::SetPolicyResponse resp;
    auto ctx = Ctx();
    return FromGrpc(Rpc()->stub->SetPolicy(ctx.get(), req, &resp), What("set policy"));
  }
  absl::StatusOr<uint64_t> Flush(uint32_t vdi) override {
    v1::CacheFlushRequest req;
    req.set_vdi_id(vdi);
    req.set_all_vdis(vdi == 0);
    req.set_epoch(ring_epoch());
    v1::CacheFlushResponse resp;
    auto ctx = Ctx(3600 * 1000, kNoWait);
    absl::Status s = FromGrpc(Rpc()->stub->Flush(ctx.get(), req, &resp), What("flush"));
    if (!s.ok()) return s;
    return resp.dirty_bytes_left();
  }
  absl::Status FlushMoving(const std::vector<ring::Member>& next) override {
    v1::CacheFlushRequest req;
    req.set_all_vdis(true);
    req.set_epoch(ring_epoch());
    for (const auto& m : next) {
      v1::RingMember* rm = req.add_moving_under();
      rm->set_id(m.id);
      rm->set_weight(m.weight);
    }
    *req.mutable_fence() = fence();
    v1::CacheFlushResponse resp;
    auto ctx = Ctx(3600 * 1000, kNoWait);
    return FromGrpc(Rpc()->stub->Flush(ctx.get(), req, &resp), What("handoff flush"));
  }
  absl::Status Stats(uint32_t vdi, std::vector<v1::VdiCacheStats>* out) override {
    v1::CacheStatsRequest req;
    req.set_vdi_id(vdi);
    req.set_all_vdis(vdi == 0);
    v1::CacheStatsResponse resp;
    auto ctx = Ctx(5000);  // status and stats answer soon with what they know
    absl::Status s = FromGrpc(Rpc()->stub->Stats(ctx.get(), req, &resp), What("stats"));
    for (const auto& v : resp.vdis()) out->push_back(v);
    return s;
  }
  absl::StatusOr<NodeHealth> Health(int timeout_ms) override {
    RC_ASSIGN_OR_RETURN(v1::CacheStatsResponse resp, NodeState(timeout_ms, "health"));
    NodeHealth h;
    h.quarantined = resp.quarantined();
    h.device_failed = resp.device_failed();
    h.device_error = resp.device_error();
    h.epoch = resp.epoch();
    h.ssd_bytes = resp.ssd_bytes();
    h.ssd_used_bytes = resp.ssd_used_bytes();
    h.dirty_bytes = resp.dirty_bytes();
    h.hits = resp.hits();
    h.misses = resp.misses();
    h.wear = resp.wear();
    return h;
  }
  absl::Status Probe(int timeout_ms) override { return NodeState(timeout_ms, "probe").status(); }
  void Reconnect(int timeout_ms) override {
    // A node that was down leaves its channel backing off between connection attempts, and a
    // fail-fast call fails without trying while it does (the channel stays in TRANSIENT_FAILURE
    // until it connects). Try at once, and wait for the connection.
    const auto deadline =
        std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
    const std::shared_ptr<grpc::Channel> channel = Rpc()->channel;
    grpc_connectivity_state state = channel->GetState(false);
    if (state == GRPC_CHANNEL_READY) return;
    grpc::experimental::ChannelResetConnectionBackoff(channel.get());
    state = channel->GetState(/*try_to_connect=*/true);
    while (state != GRPC_CHANNEL_READY && channel->WaitForStateChange(state, deadline)) {
      state = channel->GetState(/*try_to_connect=*/true);
    }
  }
  absl::StatusOr<uint64_t> DropBlocks(bool all, const std::vector<ring::Member>& ring) override {
    v1::DropBlocksRequest req;
    req.set_all(all);
    for (const auto& m : ring) {
      v1::RingMember* rm = req.add_ring_members();
      rm->set_id(m.id);
      rm->set_weight(m.weight);
    }
    *req.mutable_fence() = fence();
    v1::DropBlocksResponse resp;
    auto ctx = Ctx(600 * 1000, kNoWait);
    absl::Status s = FromGrpc(Rpc()->stub->DropBlocks(ctx.get(), req, &resp), What("drop blocks"));
    if (!s.ok()) return s;
    return resp.dirty_blocks_kept();
  }
  void CancelInFlight() override {
    {
      absl::MutexLock l(&live_mu_);
      for (grpc::ClientContext* ctx : live_) ctx->TryCancel();
    }
    absl::MutexLock l(&data_mu_);
    if (data_) data_->CancelInFlight();
  }
  absl::StatusOr<uint32_t> RelogRecords(const std::vector<uint64_t>& seqs) override {
    v1::RelogRecordsRequest req;
    for (uint64_t s : seqs) req.add_sequences(s);
    *req.mutable_fence() = fence();
    v1::RelogRecordsResponse resp;
    auto ctx = Ctx(60 * 1000);
    RC_RETURN_IF_ERROR(FromGrpc(Rpc()->stub->RelogRecords(ctx.get(), req, &resp), What("relog")));
    return resp.relogged();
  }
  absl::StatusOr<v1::ResizeTiersResponse> ResizeTiers(uint64_t ssd_bytes,
                                                      uint64_t ram_bytes) override {
    v1::ResizeTiersRequest req;
    req.set_ssd_bytes(ssd_bytes);
    req.set_ram_bytes(ram_bytes);
    v1::ResizeTiersResponse resp;
    // A growth writes the new slots' index entries; a policy rebuild passes every block.
    auto ctx = Ctx(120 * 1000);
    RC_RETURN_IF_ERROR(FromGrpc(Rpc()->stub->ResizeTiers(ctx.get(), req, &resp), What("resize")));
    return resp;
  }
  absl::Status SetDataRing(const datanode::DataRing& ring) override {
    v1::SetDataRingResponse resp;
    auto ctx = Ctx(120 * 1000);  // waits for the node's requests on the previous ring
    return FromGrpc(Rpc()->stub->SetDataRing(ctx.get(), ring.ToProto(), &resp),
                    What("set data ring"));
  }

 private:
  v1::CacheReadRequest Range(uint32_t vdi, uint64_t object, uint32_t offset,
                             uint32_t len) const {
    v1::CacheReadRequest req;
    req.set_epoch(ring_epoch());
    req.set_vdi_id(vdi);
    req.set_object_index(object);
    req.set_offset(offset);
    req.set_length(len);
    return req;
  }
  // Flushes, mode switches and drops may run for as long as an hour: they must not also wait
  // that long for a node that is not there. A flush sent while the node shut down (its server
  // refusing new calls) waited for it to come back, holding the removal that had sent it, and
  // the gateway's own stop behind that, for the hour; without waiting it fails at once, and the
  // removal replays the node's log instead (a handoff or `ringcachectl flush` is tried again).
  static constexpr bool kNoWait = false;
  // A call's context, known to CancelInFlight until the call returns (the deleter forgets it).
  struct Forget {
    const GrpcCacheClient* client;
    void operator()(grpc::ClientContext* ctx) const {
      {
        absl::MutexLock l(&client->live_mu_);
        client->live_.erase(ctx);
      }
      delete ctx;
    }
  };
  using LiveContext = std::unique_ptr<grpc::ClientContext, Forget>;

  // `wait_for_ready`: see kNoWait.
  LiveContext Ctx(int timeout_ms = 0, bool wait_for_ready = true) const {
    LiveContext ctx(new grpc::ClientContext(), Forget{this});
    // The owner is the only place an object's dirty blocks live: wait for it (until the
    // deadline) rather than fail while it restarts.
    ctx->set_wait_for_ready(wait_for_ready);
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(timeout_ms ? timeout_ms : timeout_ms_));
    absl::MutexLock l(&live_mu_);
    live_.insert(ctx.get());
    return ctx;
  }
  std::string What(const char* op) const { return absl::StrCat(op, " on cache node ", address_); }
  // The node's own state (Stats of no VDI: a cheap answer), waiting at most `timeout_ms`.
  absl::StatusOr<v1::CacheStatsResponse> NodeState(int timeout_ms, const char* op) const {
    v1::CacheStatsRequest req;
    req.set_vdi_id(0xffffffffu);  // no such VDI
    req.set_api_version(kNodeApiFormat.writes);
    v1::CacheStatsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    absl::Status s = FromGrpc(Rpc()->stub->Stats(&ctx, req, &resp), What(op));
    if (absl::StrContains(s.message(), "security handshaker")) RenewRpc();
    RC_RETURN_IF_ERROR(s);
    RC_RETURN_IF_ERROR(CheckPeerApi(resp.api_version(), absl::StrCat("cache node ", address_)));
    return resp;
  }

  // The request over the block data protocol (gateway/data_channel.h), or nullopt when it did
  // not leave that way (no data port known, or the connection failed before sending): then the
  // caller sends it over gRPC, which waits for a restarting node.
  std::optional<absl::Status> OverDataPath(wire::Request r, const char* payload, char* out,
                                           const char* op) {
    std::shared_ptr<DataChannel> ch = DataPath();
    if (ch == nullptr) return std::nullopt;
    r.epoch = ring_epoch();
    r.timeout_ms = static_cast<uint32_t>(timeout_ms_);
    bool sent = false;
    absl::Status s = ch->Call(r, payload, out, &sent);
    if (sent) return Annotate(s, absl::StrCat(What(op), ": "));
    absl::MutexLock l(&data_mu_);
    if (data_ == ch) {  // ask the node for its data port again (it may have restarted)
      data_.reset();
      next_discovery_ = absl::Now() + absl::Seconds(1);
    }
    return std::nullopt;
  }
  // The data channel, discovering the node's data port (Stats) at most once a second.
  std::shared_ptr<DataChannel> DataPath() {
    if (!use_data_path_) return nullptr;
    {
      absl::MutexLock l(&data_mu_);
      if (data_ != nullptr || discovering_ || absl::Now() < next_discovery_) return data_;
      discovering_ = true;
    }
    const absl::StatusOr<v1::CacheStatsResponse> state = NodeState(1000, "data port");
    std::string host;
    int unused = 0;
    const bool addressed = SplitHostPort(address_, &host, &unused).ok();
    absl::MutexLock l(&data_mu_);
    discovering_ = false;
    if (state.ok() && addressed && state->data_port() != 0) {
      data_ = std::make_shared<DataChannel>(host, static_cast<int>(state->data_port()),
                                            timeout_ms_, DataChannel::ProcessTls());
    } else {
      next_discovery_ = absl::Now() + absl::Seconds(1);
    }
    return data_;
  }

  // The channel to the node and its stub, replaced whole by RenewRpc; each call holds the pair
  // it started on.
  struct RpcPair {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::CacheNode::Stub> stub;
  };
  std::shared_ptr<const RpcPair> NewRpc() const {
    auto r = std::make_shared<RpcPair>();
    r->channel = PeerChannel(address_, tls::kRoleCacheNode, kPeerKeepaliveMs);
    r->stub = v1::CacheNode::NewStub(r->channel);
    return r;
  }
  std::shared_ptr<const RpcPair> Rpc() const {
    absl::MutexLock l(&rpc_mu_);
    return rpc_;
  }
  // A TLS channel whose connection attempts all fail with "Failed to create security
  // handshaker" stays that way: gRPC 1.51's certificate provider can lose its watcher when a
  // connection is dropped and another starts at the same moment (the old one's "stop watching"
  // reaches the provider after the new one's "start"), and from then on it hands the new one no
  // certificates. Seen in CI: a cache node killed -9 and restarted could never be probed again
  // (three minutes of "security handshaker" failures, the node never re-admitted). A new channel
  // has a provider of its own; at most one every 5 s.
  void RenewRpc() const {
    absl::MutexLock l(&rpc_mu_);
    const absl::Time now = absl::Now();
    if (now < next_renew_) return;
    next_renew_ = now + absl::Seconds(5);
    rpc_ = NewRpc();
  }

  const std::string address_;
  const int timeout_ms_;
  mutable absl::Mutex rpc_mu_;
  mutable std::shared_ptr<const RpcPair> rpc_ ABSL_GUARDED_BY(rpc_mu_);
  mutable absl::Time next_renew_ ABSL_GUARDED_BY(rpc_mu_) = absl::InfinitePast();
  mutable absl::Mutex live_mu_;
  mutable absl::flat_hash_set<grpc::ClientContext*> live_ ABSL_GUARDED_BY(live_mu_);
  // RINGCACHE_BLOCK_TRANSPORT=grpc turns the block data protocol off (comparisons, debugging).
  const bool use_data_path_ = UseDataPath();
  absl::Mutex data_mu_;
  std::shared_ptr<DataChannel> data_ ABSL_GUARDED_BY(data_mu_);
  bool discovering_ ABSL_GUARDED_BY(data_mu_) = false;
  absl::Time next_discovery_ ABSL_GUARDED_BY(data_mu_) = absl::InfinitePast();
};

}  // namespace

std::unique_ptr<CacheClient> MakeGrpcCacheClient(const std::string& address, int timeout_ms) {
  return std::make_unique<GrpcCacheClient>(address, timeout_ms);
}

}  // namespace ringcache::gateway
