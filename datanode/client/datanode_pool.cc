// gRPC access to the home replicas of objects, with load tracking.
#include "datanode/client/datanode_pool.h"

#include <grpcpp/grpcpp.h>

#include <google/protobuf/text_format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "datanode/client/pool_internal.h"

namespace ringcache::datanode {

using pool_internal::NowMs;
using pool_internal::Seconds;
using pool_internal::Unreachable;
using pool_internal::CopyVersion;
using pool_internal::Unconfirmed;
using pool_internal::VersionIn;
using pool_internal::BlocksOnLogPortsAllowed;
using pool_internal::InlineCallsAllowed;

absl::StatusOr<std::unique_ptr<DataNodePool>> DataNodePool::Create(
    const std::vector<DataNodeEndpoint>& nodes, metrics::Registry* registry, int rpc_timeout_ms,
    const std::string& role) {
  if (nodes.empty()) return absl::InvalidArgumentError("no data nodes configured");
  DataRing spec;
  spec.nodes = nodes;
  for (const auto& e : nodes) spec.members.push_back(e.id);
  return Create(spec, registry, rpc_timeout_ms, role);
}

absl::StatusOr<std::unique_ptr<DataNodePool>> DataNodePool::Create(const DataRing& spec,
                                                                  metrics::Registry* registry,
                                                                  int rpc_timeout_ms,
                                                                  const std::string& role) {
  std::unique_ptr<DataNodePool> pool(new DataNodePool());
  pool->registry_ = registry;
  pool->role_ = role;
  pool->rpc_timeout_ms_ = rpc_timeout_ms;
  if (registry != nullptr) {
    pool->log_retries_ = registry->GetCounter(
        absl::StrCat("ringcache_", role, "_log_append_retries_total"),
        "Log appends asked again of a data node that answered UNAVAILABLE (a connection reset, "
        "a restart) because the other candidates were not enough.");
    pool->log_inline_ = registry->GetCounter(
        absl::StrCat("ringcache_", role, "_log_appends_inline_total"),
        "Log appends sent on the writer's own thread (the data node's log link was idle), "
        "without a hand-off to the link's sender thread.");
    pool->write_retries_ = registry->GetCounter(
        absl::StrCat("ringcache_", role, "_home_write_retries_total"),
        "Versioned writes home asked again of a data node that answered UNAVAILABLE (a "
        "connection reset, a restart).");
  }
  RC_ASSIGN_OR_RETURN(std::shared_ptr<const View> v, pool->MakeView(spec));
  absl::MutexLock l(&pool->mu_);
  pool->view_ = std::move(v);
  return pool;
}

absl::StatusOr<std::shared_ptr<const DataNodePool::View>> DataNodePool::MakeView(
    const DataRing& spec) {
  RC_RETURN_IF_ERROR(spec.Validate());
  auto v = std::make_shared<View>();
  v->spec = spec;
  std::sort(v->spec.nodes.begin(), v->spec.nodes.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  RC_ASSIGN_OR_RETURN(ring::Ring r, BuildDataRing(v->spec.Endpoints(v->spec.members)));
  v->ring = std::make_unique<ring::Ring>(std::move(r));
  v->ring_members = v->spec.members;
  if (!v->spec.target.empty()) {
    RC_ASSIGN_OR_RETURN(ring::Ring t, BuildDataRing(v->spec.Endpoints(v->spec.target)));
    v->target = std::make_unique<ring::Ring>(std::move(t));
  }
  absl::MutexLock l(&mu_);
  for (const auto& e : v->spec.nodes) {
    Node* found = nullptr;
    for (const auto& n : all_nodes_) {
      if (n->endpoint.id == e.id && n->endpoint.address == e.address) found = n.get();
    }
    if (found == nullptr) {
      auto n = std::make_unique<Node>();
      n->endpoint = e;
      n->channel = PeerChannel(e.address, tls::kRoleDataNode, kDataNodeKeepaliveMs);
      n->stub = v1::DataNode::NewStub(n->channel);
      std::string host;
      int unused_port = 0;
      if (SplitHostPort(e.address, &host, &unused_port).ok()) {
        n->log_link = std::make_unique<LogLink>(e.id, host, rpc_timeout_ms_);
        n->store_link = std::make_unique<LogLink>(e.id, host, rpc_timeout_ms_);
        n->load_link = std::make_unique<LogLink>(e.id, host, rpc_timeout_ms_);
      }
      if (registry_ != nullptr) {
        n->latency = registry_->GetHistogram(
            absl::StrCat("ringcache_", role_, "_datanode_op_duration_seconds"),
            absl::StrCat("Latency of data node operations seen by the ", role_, "."),
            {{"datanode", absl::StrCat(e.id)}});
        n->log_calls = registry_->GetCounter(
            absl::StrCat("ringcache_", role_, "_log_append_calls_total"),
            "LogAppend calls sent to the data node; each carries the log records of one or more "
            "concurrent writes (group commit).",
            {{"datanode", absl::StrCat(e.id)}});
      }
      found = n.get();
      all_nodes_.push_back(std::move(n));
    }
    found->endpoint.weight = e.weight;
    v->nodes.push_back(found);
    if (!v->spec.IsOut(e.id)) v->live.push_back(found);
    v->by_id[e.id] = found;
  }
  return std::shared_ptr<const View>(std::move(v));
}

std::shared_ptr<const DataNodePool::View> DataNodePool::view() const {
  absl::MutexLock l(&mu_);
  return view_;
}

absl::Status DataNodePool::SetRing(const DataRing& spec) {
  absl::MutexLock set(&set_mu_);
  std::shared_ptr<const View> old = view();
  if (spec.epoch < old->spec.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data ring epoch ", spec.epoch, " is older than the current ", old->spec.epoch));
  }
  if (spec.epoch == old->spec.epoch) return absl::OkStatus();
  RC_ASSIGN_OR_RETURN(std::shared_ptr<const View> next, MakeView(spec));
  {
    absl::MutexLock l(&mu_);
    view_ = std::move(next);
  }
  // Requests hold their snapshot for as long as they run: once only `old` is left holding the
  // previous one, none of them can still send to the previous homes.
  while (old.use_count() > 1) absl::SleepFor(absl::Milliseconds(1));
  return absl::OkStatus();
}

DataRing DataNodePool::ring() const { return view()->spec; }

DataNodePool::Node* DataNodePool::Find(uint32_t id) const { return view()->Find(id); }

std::unique_ptr<grpc::ClientContext> DataNodePool::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(rpc_timeout_ms_));
  return ctx;
}

void DataNodePool::Note(Node* n, const grpc::Status& s) {
  if (s.ok()) {
    n->down_since_ms = 0;
    return;
  }
  if (!Unreachable(s)) return;  // the node answered (with an error): it is up
  const int64_t now = NowMs();
  n->failed_at_ms = now;
  int64_t zero = 0;
  n->down_since_ms.compare_exchange_strong(zero, now);
}

void DataNodePool::Observe(Node* n, double seconds) {
  // EWMA with weight 1/8 on the newest sample.
  double old = n->ewma_latency_s.load(std::memory_order_relaxed);
  n->ewma_latency_s.store(old == 0 ? seconds : old * 0.875 + seconds * 0.125,
                          std::memory_order_relaxed);
  if (n->latency != nullptr) n->latency->Observe(seconds);
}

void DataNodePool::SortByLoad(const View& v, std::vector<uint32_t>* ids) {
  // Snapshot the loads first: they change concurrently, and a comparator that reads them live is
  // not a strict weak ordering (undefined behaviour in std::sort; it crashed under load).
  std::vector<std::pair<double, uint32_t>> by_load;
  by_load.reserve(ids->size());
  for (uint32_t id : *ids) by_load.emplace_back(LoadOf(v.Find(id)), id);
  std::stable_sort(by_load.begin(), by_load.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < ids->size(); ++i) (*ids)[i] = by_load[i].second;
}

double DataNodePool::Load(uint32_t id) const { return LoadOf(Find(id)); }

double DataNodePool::LoadOf(const Node* n) {
  if (n == nullptr) return 1e9;
  // Queue depth × latency (docs/design.md §4, LCR's device load); +1 so an idle slow node still
  // ranks behind an idle fast one.
  return (n->inflight.load(std::memory_order_relaxed) + 1) *
         n->ewma_latency_s.load(std::memory_order_relaxed);
}

absl::StatusOr<std::vector<uint32_t>> DataNodePool::HomesIn(const View& v, uint32_t vdi,
                                                           uint64_t object, int n) {
  n = std::min<int>(n, static_cast<int>(v.ring_members.size()));
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, v.ring->Owners(ring::ObjectKey{vdi, object}, n));
  if (v.spec.out.empty()) return homes;
  // An out member still places the object, but holds nothing trusted: its replicas are being
  // made again on the target ring.
  std::erase_if(homes, [&v](uint32_t id) { return v.spec.IsOut(id); });
  if (homes.empty()) {
    return absl::UnavailableError(absl::StrCat("every home replica of object ", object,
                                               " of VDI ", vdi, " is on a data node taken out"));
  }
  return homes;
}

absl::StatusOr<std::vector<uint32_t>> DataNodePool::WriteHomesIn(const View& v, uint32_t vdi,
                                                                uint64_t object, int n) {
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, HomesIn(v, vdi, object, n));
  if (v.target == nullptr) return homes;
  const int t = std::min<int>(n, static_cast<int>(v.spec.target.size()));
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> more,
                      v.target->Owners(ring::ObjectKey{vdi, object}, t));
  for (uint32_t id : more) {
    if (std::find(homes.begin(), homes.end(), id) == homes.end()) homes.push_back(id);
  }
  return homes;
}

absl::StatusOr<std::vector<uint32_t>> DataNodePool::Homes(uint32_t vdi, uint64_t object,
                                                         int n) const {
  return HomesIn(*view(), vdi, object, n);
}

double DataNodePool::HomeLoad(uint32_t vdi, uint64_t object, int n) const {
  const auto v = view();
  auto homes = HomesIn(*v, vdi, object, n);
  if (!homes.ok()) return 1e9;
  double worst = 0;
  for (uint32_t id : *homes) worst = std::max(worst, LoadOf(v->Find(id)));
  return worst;
}

absl::Status DataNodePool::PutVdi(const v1::VdiGeometry& vdi,
                                  const std::function<bool(uint32_t node)>& complete) {
  const auto v = view();  // held for the loop: the pool may swap its view
  for (Node* n : v->live) {
    v1::PutVdiRequest req;
    *req.mutable_vdi() = vdi;
    req.set_complete(complete != nullptr && complete(n->endpoint.id));
    v1::PutVdiResponse resp;
    auto ctx = Context();
    RC_RETURN_IF_ERROR(FromGrpc(n->stub->PutVdi(ctx.get(), req, &resp),
                                absl::StrCat("register VDI on data node ", n->endpoint.id)));
  }
  return absl::OkStatus();
}

absl::Status DataNodePool::ClearStore(const DataNodeEndpoint& node, const std::string& reason) {
  auto stub = v1::DataNode::NewStub(PeerChannel(node.address, tls::kRoleDataNode));
  v1::ClearStoreRequest req;
  req.set_reason(reason);
  v1::ClearStoreResponse resp;
  auto ctx = Context();
  return FromGrpc(stub->ClearStore(ctx.get(), req, &resp),
                  absl::StrCat("clear the store of data node ", node.id));
}

absl::Status DataNodePool::DeleteVdi(uint32_t vdi_id) {
  const auto v = view();  // held for the loop: the pool may swap its view
  for (Node* n : v->live) {
    v1::DeleteVdiRequest req;
    req.set_vdi_id(vdi_id);
    v1::DeleteVdiResponse resp;
    auto ctx = Context();
    grpc::Status s = n->stub->DeleteVdi(ctx.get(), req, &resp);
    if (!s.ok() && s.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
      return FromGrpc(s, absl::StrCat("delete VDI on data node ", n->endpoint.id));
    }
  }
  return absl::OkStatus();
}


bool DataNodePool::RepairFrom(const View& v, uint32_t target, uint32_t vdi, uint64_t object,
                              uint32_t first, uint32_t i, uint32_t block_size,
                              const v1::ReadBlocksResponse& good, bool only_if_absent) {
  Node* b = v.Find(target);
  if (b == nullptr) return false;
  v1::WriteBlocksRequest w;
  w.mutable_range()->set_vdi_id(vdi);
  w.mutable_range()->set_object_index(object);
  w.mutable_range()->set_first_block(first + i);
  w.set_data(good.data().substr(uint64_t{i} * block_size, block_size));
  w.add_checksums(BlockChecksum(w.data()));
  w.set_only_if_absent(only_if_absent);
  const CopyVersion ver = VersionIn(good, i);
  if (ver.writer != 0) {
    w.set_writer_node(ver.writer);  // keep the good copy's version
    w.add_versions(ver.seq);
    w.add_epochs(ver.epoch);
  }
  v1::WriteBlocksResponse wr;
  auto wctx = Context();
  if (!b->stub->WriteBlocks(wctx.get(), w, &wr).ok()) return false;
  repairs_.fetch_add(1);
  return true;
}

absl::StatusOr<BlockRun> DataNodePool::Read(uint32_t vdi, uint64_t object, uint32_t first,
                                            uint32_t count, int n, uint32_t block_size) {
  const auto v = view();
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, HomesIn(*v, vdi, object, n));
  SortByLoad(*v, &homes);
  if (read_order_for_test_) read_order_for_test_(&homes);
  absl::Status last = absl::UnavailableError("no home replica");
  std::vector<uint32_t> corrupt;
  // Answers of incomplete replicas (docs/durability.md, "Absent is not zero"): their absent
  // blocks are confirmed by a complete replica, or by one that holds them, before they read
  // as zeros. `merged` collects the newest copy of every block seen so far.
  std::optional<v1::ReadBlocksResponse> merged;
  std::vector<uint32_t> incomplete;
  bool failed = false;
  for (uint32_t id : homes) {
    Node* node = v->Find(id);
    v1::ReadBlocksRequest req;
    req.mutable_range()->set_vdi_id(vdi);
    req.mutable_range()->set_object_index(object);
    req.mutable_range()->set_first_block(first);
    req.mutable_range()->set_block_count(count);
    v1::ReadBlocksResponse resp;
    const auto start = std::chrono::steady_clock::now();
    node->inflight.fetch_add(1);
    grpc::Status s;
    // The log port when it takes block reads and no other read is on it; gRPC otherwise, and
    // also when the port itself failed (the link parked: the node may be fine).
    absl::Status on_port;
    if (node->load_link != nullptr && BlocksOnLogPortsAllowed() &&
        node->load_link->stores_blocks() && node->load_link->TryCallLoad(req, &resp, &on_port) &&
        (!absl::IsUnavailable(on_port) || node->load_link->stores_blocks())) {
      s = ToGrpc(on_port);
    } else {
      resp.Clear();
      auto ctx = Context();
      s = node->stub->ReadBlocks(ctx.get(), req, &resp);
    }
    node->inflight.fetch_sub(1);
    Observe(node, Seconds(start));
    Note(node, s);
    if (!s.ok()) {
      last = FromGrpc(s, absl::StrCat("read from data node ", id));
      failed = true;
      if (s.error_code() == grpc::StatusCode::DATA_LOSS) corrupt.push_back(id);
      continue;
    }
    if (resp.data().size() != uint64_t{count} * block_size ||
        resp.present_size() != static_cast<int>(count)) {
      last = absl::DataLossError(absl::StrCat("data node ", id, " returned a short read"));
      failed = true;
      continue;
    }
    // Repair copies that failed their checksum from this good one (present blocks only).
    for (uint32_t bad : corrupt) {
      for (uint32_t i = 0; i < count; ++i) {
        if (resp.present(i)) RepairFrom(*v, bad, vdi, object, first, i, block_size, resp, false);
      }
    }
    corrupt.clear();
    if (!merged) {
      if (!resp.incomplete()) {
        BlockRun run;
        run.data = std::move(*resp.mutable_data());
        run.present.assign(resp.present().begin(), resp.present().end());
        return run;
      }
      merged = std::move(resp);
      incomplete.push_back(id);
      continue;
    }
    // A later replica: fill what the incomplete ones could not confirm, keep the newest copy
    // of every block, and repair the incomplete replicas that lacked a block.
    for (uint32_t i = 0; i < count; ++i) {
      // The newest copy by full version, a trim's tombstone included (an unversioned copy
      // counts as older than any versioned one); a block still open takes any settled answer.
      const bool mine_unconfirmed = Unconfirmed(*merged, i);
      const bool has_copy = resp.present(i) || VersionIn(resp, i).writer != 0;
      const bool newer = has_copy && VersionIn(resp, i).Key() > VersionIn(*merged, i).Key();
      if (newer || (mine_unconfirmed && !Unconfirmed(resp, i))) {
        if (resp.present(i)) {
          for (uint32_t lacking : incomplete) {
            RepairFrom(*v, lacking, vdi, object, first, i, block_size, resp, true);
          }
        }
        merged->mutable_data()->replace(uint64_t{i} * block_size, block_size,
                                        resp.data(), uint64_t{i} * block_size, block_size);
        merged->set_present(static_cast<int>(i), resp.present(i));
        while (merged->writers_size() < static_cast<int>(count)) merged->add_writers(0);
        while (merged->versions_size() < static_cast<int>(count)) merged->add_versions(0);
        while (merged->epochs_size() < static_cast<int>(count)) merged->add_epochs(0);
        const CopyVersion ver = VersionIn(resp, i);
        merged->set_writers(static_cast<int>(i), ver.writer);
        merged->set_versions(static_cast<int>(i), ver.seq);
        merged->set_epochs(static_cast<int>(i), ver.epoch);
      }
    }
    if (resp.incomplete()) {
      incomplete.push_back(id);
    } else {
      merged->set_incomplete(false);  // a complete replica answered: every block is settled
    }
    bool open = false;
    for (uint32_t i = 0; i < count && !open; ++i) open = Unconfirmed(*merged, i);
    if (!open) break;
  }
  if (!merged) return last;
  for (uint32_t i = 0; i < count; ++i) {
    if (Unconfirmed(*merged, i)) {
      unconfirmed_reads_.fetch_add(1);
      if (failed) {  // a replica that may be complete did not answer: try again later
        return absl::UnavailableError(absl::StrCat(
            "block ", first + i, " of object ", object, " of VDI ", vdi,
            ": only incomplete replicas (new or wiped data nodes ", absl::StrJoin(incomplete, ","),
            ") answered and none holds it; ", last.message()));
      }
      return absl::DataLossError(absl::StrCat(
          "block ", first + i, " of object ", object, " of VDI ", vdi,
          ": every replica that answered is incomplete (new or wiped data nodes ",
          absl::StrJoin(incomplete, ","), ") and none holds it"));
    }
  }
  BlockRun run;
  run.data = std::move(*merged->mutable_data());
  run.present.assign(merged->present().begin(), merged->present().end());
  return run;
}

absl::StatusOr<std::vector<bool>> DataNodePool::Presence(uint32_t vdi, uint64_t object,
                                                         uint32_t first, uint32_t count, int n) {
  const auto v = view();
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, HomesIn(*v, vdi, object, n));
  SortByLoad(*v, &homes);
  if (read_order_for_test_) read_order_for_test_(&homes);
  absl::Status last = absl::UnavailableError("no home replica");
  // Blocks present on any replica; an incomplete replica's absent ones stay open until another
  // replica settles them. Open blocks at the end are reported allocated: a client then reads
  // them (and the read tells), never skips data as a hole.
  std::optional<std::vector<bool>> present;
  std::vector<bool> open(count, false);
  for (uint32_t id : homes) {
    v1::ReadBlocksRequest req;
    req.mutable_range()->set_vdi_id(vdi);
    req.mutable_range()->set_object_index(object);
    req.mutable_range()->set_first_block(first);
    req.mutable_range()->set_block_count(count);
    req.set_presence_only(true);
    v1::ReadBlocksResponse resp;
    auto ctx = Context();
    grpc::Status s = v->Find(id)->stub->ReadBlocks(ctx.get(), req, &resp);
    if (!s.ok() || resp.present_size() != static_cast<int>(count)) {
      last = s.ok() ? absl::DataLossError("short presence answer")
                    : FromGrpc(s, absl::StrCat("block status from data node ", id));
      continue;
    }
    if (!present) {
      present.emplace(resp.present().begin(), resp.present().end());
      for (uint32_t i = 0; i < count; ++i) open[i] = Unconfirmed(resp, i);
    } else {
      for (uint32_t i = 0; i < count; ++i) {
        if (!open[i]) continue;
        (*present)[i] = resp.present(i);
        open[i] = Unconfirmed(resp, i);
      }
    }
    if (std::none_of(open.begin(), open.end(), [](bool b) { return b; })) return *present;
  }
  if (!present) return last;
  for (uint32_t i = 0; i < count; ++i) {
    if (open[i]) (*present)[i] = true;
  }
  return *present;
}

absl::Status DataNodePool::WriteAll(uint32_t vdi, uint64_t object, uint32_t first,
                                    const std::string& data, int n, const HomeStamp* stamp,
                                    uint32_t* stored) {
  const auto v = view();  // held until every write answered (SetRing waits for it)
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, WriteHomesIn(*v, vdi, object, n));
  const v1::WriteBlocksRequest req =
      pool_internal::BlockWriteRequest(vdi, object, first, data, stamp);
  struct Call {
    std::unique_ptr<grpc::ClientContext> ctx;
    v1::WriteBlocksResponse resp;
    grpc::Status status;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Call> calls(homes.size());
  // Sends the write to the homes listed (indices into `homes`), all at once, and waits.
  auto round = [&](const std::vector<size_t>& which) {
    absl::BlockingCounter pending(static_cast<int>(which.size()));
    auto finisher = [&](size_t i, Node* node) {
      return [&, i, node](grpc::Status s) {
        Note(node, s);
        calls[i].status = std::move(s);
        node->inflight.fetch_sub(1);
        Observe(node, Seconds(calls[i].start));
        pending.DecrementCount();
      };
    };
    std::vector<size_t> begun;  // sent on this thread: their answers are read here below
    for (size_t i : which) {
      Node* node = v->Find(homes[i]);
      calls[i].start = std::chrono::steady_clock::now();
      if (write_fault_for_test_) {
        if (grpc::Status injected = write_fault_for_test_(homes[i]); !injected.ok()) {
          calls[i].status = injected;
          pending.DecrementCount();
          continue;
        }
      }
      node->inflight.fetch_add(1);
      auto finish = finisher(i, node);
      // The log port when it takes block writes and no other write is on it, sent from this
      // thread (no hand-off to the link's or gRPC's threads and back, a few context switches
      // per home on every destaged run), else on the link's thread; gRPC otherwise.
      if (node->store_link != nullptr && BlocksOnLogPortsAllowed() &&
          node->store_link->stores_blocks()) {
        absl::Status sent;
        if (InlineCallsAllowed() && node->store_link->TryBeginStore(req, &sent)) {
          if (sent.ok()) {
            begun.push_back(i);
          } else {
            finish(ToGrpc(sent));
          }
          continue;
        }
        if (node->store_link->TrySendStore(&req, &calls[i].resp,
                                           [finish](absl::Status s) { finish(ToGrpc(s)); })) {
          continue;
        }
      }
      calls[i].ctx = Context();  // only a call over gRPC needs one
      node->stub->async()->WriteBlocks(calls[i].ctx.get(), &req, &calls[i].resp,
                                       std::move(finish));
    }
    for (size_t i : begun) {
      Node* node = v->Find(homes[i]);
      finisher(i, node)(ToGrpc(node->store_link->FinishStore(&calls[i].resp)));
    }
    pending.Wait();
  };
  std::vector<size_t> all(homes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  round(all);
  // A transient fault is retried, not reported: a stamped write is idempotent (a home keeps the
  // newest version), so the homes that answered UNAVAILABLE (a reset connection, a restart) are
  // asked again on fresh connections before the write fails.
  for (const absl::Duration pause : {absl::Milliseconds(20), absl::Milliseconds(200)}) {
    if (stamp == nullptr) break;
    std::vector<size_t> again;
    for (size_t i = 0; i < homes.size(); ++i) {
      if (calls[i].status.error_code() == grpc::StatusCode::UNAVAILABLE) again.push_back(i);
    }
    if (again.empty()) break;
    absl::SleepFor(pause);
    if (write_retries_ != nullptr) write_retries_->Increment(static_cast<double>(again.size()));
    round(again);
  }
  for (size_t i = 0; i < homes.size(); ++i) {
    RC_RETURN_IF_ERROR(FromGrpc(calls[i].status, absl::StrCat("write to data node ", homes[i])));
  }
  if (stored != nullptr) {
    *stored = 0;
    for (const Call& c : calls) *stored = std::max(*stored, c.resp.blocks_stored());
  }
  return absl::OkStatus();
}

absl::Status DataNodePool::TrimAll(uint32_t vdi, uint64_t object, uint32_t first,
                                   uint32_t count, int n, const HomeStamp* stamp) {
  const auto v = view();
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, WriteHomesIn(*v, vdi, object, n));
  for (uint32_t id : homes) {
    v1::TrimBlocksRequest req;
    req.mutable_range()->set_vdi_id(vdi);
    req.mutable_range()->set_object_index(object);
    req.mutable_range()->set_first_block(first);
    req.mutable_range()->set_block_count(count);
    if (stamp != nullptr) {
      req.set_writer_node(stamp->writer);
      for (uint64_t s : stamp->seqs) req.add_versions(s);
      for (uint64_t e : stamp->epochs) req.add_epochs(e);
    }
    v1::TrimBlocksResponse resp;
    auto ctx = Context();
    RC_RETURN_IF_ERROR(
        FromGrpc(v->Find(id)->stub->TrimBlocks(ctx.get(), req, &resp),
                 absl::StrCat("trim on data node ", id)));
  }
  return absl::OkStatus();
}

std::vector<uint32_t> DataNodePool::node_ids() const {
  const auto v = view();
  std::vector<uint32_t> ids;
  for (Node* n : v->live) ids.push_back(n->endpoint.id);
  return ids;
}

}  // namespace ringcache::datanode
