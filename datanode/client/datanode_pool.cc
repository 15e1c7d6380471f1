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
#include "common/status_macros.h"

namespace ringcache::datanode {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

absl::Status DataRing::Validate() const {
  if (members.empty()) return absl::InvalidArgumentError("data ring without members");
  absl::flat_hash_map<uint32_t, int> seen;
  for (const auto& n : nodes) {
    if (n.id == 0) return absl::InvalidArgumentError("data node id 0");
    if (n.address.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("data node ", n.id, " has no address"));
    }
    if (++seen[n.id] > 1) {
      return absl::InvalidArgumentError(absl::StrCat("data node id ", n.id, " listed twice"));
    }
  }
  // Out nodes need no address: one that left the ring is only remembered.
  if (absl::flat_hash_set<uint32_t>(out.begin(), out.end()).size() != out.size()) {
    return absl::InvalidArgumentError("out data node listed twice");
  }
  for (const auto* ids : {&members, &target}) {
    absl::flat_hash_map<uint32_t, int> in;
    for (uint32_t id : *ids) {
      if (!seen.contains(id)) {
        return absl::InvalidArgumentError(absl::StrCat("ring member ", id, " has no address"));
      }
      if (++in[id] > 1) {
        return absl::InvalidArgumentError(absl::StrCat("ring member ", id, " listed twice"));
      }
    }
  }
  return absl::OkStatus();
}

bool DataRing::IsOut(uint32_t id) const {
  return std::find(out.begin(), out.end(), id) != out.end();
}

std::vector<DataNodeEndpoint> DataRing::Endpoints(const std::vector<uint32_t>& ids) const {
  std::vector<DataNodeEndpoint> out;
  for (uint32_t id : ids) {
    for (const auto& n : nodes) {
      if (n.id == id) out.push_back(n);
    }
  }
  return out;
}

v1::DataRing DataRing::ToProto() const {
  v1::DataRing p;
  p.set_epoch(epoch);
  for (const auto& n : nodes) {
    v1::DataNodeAddress* a = p.add_nodes();
    a->set_id(n.id);
    a->set_address(n.address);
    a->set_weight(n.weight);
    a->set_zone(n.zone);
  }
  for (uint32_t id : members) p.add_members(id);
  for (uint32_t id : target) p.add_target(id);
  for (uint32_t id : out) p.add_out(id);
  return p;
}

DataRing DataRing::FromProto(const v1::DataRing& p) {
  DataRing r;
  r.epoch = p.epoch();
  for (const auto& a : p.nodes()) {
    r.nodes.push_back({a.id(), a.address(), a.weight() > 0 ? a.weight() : 1.0, a.zone()});
  }
  r.members.assign(p.members().begin(), p.members().end());
  r.target.assign(p.target().begin(), p.target().end());
  r.out.assign(p.out().begin(), p.out().end());
  return r;
}

std::string EncodeDataRing(const DataRing& ring) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(ring.ToProto(), &text);
  return "# ringcache data ring (written by the node; do not edit)\n" + text;
}

absl::StatusOr<DataRing> DecodeDataRing(const std::string& text) {
  v1::DataRing p;
  if (!google::protobuf::TextFormat::ParseFromString(text, &p)) {
    return absl::DataLossError("not a data ring (damaged?)");
  }
  DataRing r = DataRing::FromProto(p);
  RC_RETURN_IF_ERROR(r.Validate());
  return r;
}

absl::Status SaveDataRing(const std::string& path, const DataRing& ring) {
  return WriteFileAtomically(path, EncodeDataRing(ring));
}

absl::StatusOr<std::optional<DataRing>> LoadDataRing(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<DataRing>();
    return absl::UnavailableError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream body;
  body << in.rdbuf();
  auto r = DecodeDataRing(body.str());
  if (!r.ok()) return absl::DataLossError(absl::StrCat(path, ": ", r.status().message()));
  return std::optional<DataRing>(*std::move(r));
}

absl::StatusOr<ring::Ring> BuildDataRing(const std::vector<DataNodeEndpoint>& nodes) {
  ring::RingConfig rc;
  for (const auto& e : nodes) rc.members.push_back(ring::Member{e.id, e.weight, e.zone});
  return ring::Ring::Build(rc);
}

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
      n->channel = PeerChannel(e.address, tls::kRoleDataNode);
      n->stub = v1::DataNode::NewStub(n->channel);
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

void DataNodePool::ProbeAll(int timeout_ms) {
  struct Call {
    grpc::ClientContext ctx;
    v1::HealthResponse resp;
    grpc::Status status;
  };
  const auto v = view();
  const std::vector<Node*>& nodes = v->nodes;
  std::vector<Call> calls(nodes.size());
  v1::HealthRequest req;
  absl::BlockingCounter pending(static_cast<int>(nodes.size()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    calls[i].ctx.set_deadline(std::chrono::system_clock::now() +
                              std::chrono::milliseconds(timeout_ms));
    nodes[i]->stub->async()->Health(&calls[i].ctx, &req, &calls[i].resp,
                                     [&, i](grpc::Status st) {
                                       calls[i].status = std::move(st);
                                       pending.DecrementCount();
                                     });
  }
  pending.Wait();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Note(nodes[i], calls[i].status);
    const std::string& inc = calls[i].resp.store_incarnation();
    if (!calls[i].status.ok() || inc.empty()) continue;
    Node* n = nodes[i];
    absl::MutexLock l(&n->store_mu);
    if (!n->store_incarnation.empty() && n->store_incarnation != inc) {
      n->store_changes.fetch_add(1);
      spdlog::warn("data node {} came back with another store (incarnation {} -> {}): a new or "
                   "wiped disk; the log copies and replicas it held are gone",
                   n->endpoint.id, n->store_incarnation, inc);
    }
    n->store_incarnation = inc;
  }
}

uint64_t DataNodePool::StoreChanges(uint32_t id) const {
  const Node* n = Find(id);
  return n == nullptr ? 0 : n->store_changes.load();
}

std::vector<uint32_t> DataNodePool::DownFor(int64_t ms) const {
  std::vector<uint32_t> out;
  const int64_t now = NowMs();
  for (Node* n : view()->nodes) {
    const int64_t since = n->down_since_ms.load();
    if (since != 0 && now - since >= ms) out.push_back(n->endpoint.id);
  }
  return out;
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

namespace {

// A block an incomplete replica (a new or wiped store) says is absent, without a tombstone: it
// may exist on another replica.
bool Unconfirmed(const v1::ReadBlocksResponse& r, uint32_t i) {
  return r.incomplete() && !r.present(i) && (r.writers_size() <= static_cast<int>(i) ||
                                             r.writers(i) == 0);
}

// A stored copy's version as (epoch, sequence, writer): the order of datanode/store.h's
// CompareVersions.
struct CopyVersion {
  uint64_t epoch = 0, seq = 0;
  uint32_t writer = 0;
  auto Key() const { return std::make_tuple(epoch, seq, writer); }
};

CopyVersion VersionIn(const v1::ReadBlocksResponse& r, uint32_t i) {
  CopyVersion v;
  if (r.writers_size() > static_cast<int>(i)) v.writer = r.writers(i);
  if (r.versions_size() > static_cast<int>(i)) v.seq = r.versions(i);
  if (r.epochs_size() > static_cast<int>(i)) v.epoch = r.epochs(i);
  return v;
}

}  // namespace

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

std::vector<uint32_t> DataNodePool::KeepRingOnNodes(const DataRing& ring) {
  v1::PutRingRequest req;
  req.set_epoch(ring.epoch);
  ring.ToProto().SerializeToString(req.mutable_ring());
  std::vector<uint32_t> missed;
  const auto v = view();  // held for the loop: the pool may swap its view
  for (Node* n : v->live) {
    v1::PutRingResponse resp;
    auto ctx = Context();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = n->stub->PutRing(ctx.get(), req, &resp);
    Note(n, s);
    if (!s.ok()) missed.push_back(n->endpoint.id);
  }
  return missed;
}

absl::StatusOr<bool> DataNodePool::AdoptNewestKeptRing() {
  // The newest ring the live nodes keep, if newer than `had`. The caller lets the view go
  // before SetRing, which waits for every holder of the old one.
  auto newest_kept = [this](uint64_t* had) {
    const auto v = view();
    *had = v->spec.epoch;
    std::optional<DataRing> newest;
    v1::StatsRequest req;
    req.set_include_ring(true);
    StatsOfLive(*v, req, 5, [&](uint32_t, const grpc::Status& s, const v1::StatsResponse& resp) {
      if (!s.ok() || resp.ring_epoch() <= *had) return true;
      if (newest && resp.ring_epoch() <= newest->epoch) return true;
      v1::DataRing p;
      if (!p.ParseFromString(resp.ring())) return true;
      DataRing r = DataRing::FromProto(p);
      if (r.Validate().ok()) newest = std::move(r);
      return true;
    });
    return newest;
  };
  bool changed = false;
  for (int round = 0; round < 8; ++round) {  // the nodes of a newer ring may know a newer one
    uint64_t had = 0;
    const std::optional<DataRing> newest = newest_kept(&had);
    if (!newest) return changed;
    spdlog::info("data ring epoch {} found on the data nodes (this node had epoch {})",
                 newest->epoch, had);
    RC_RETURN_IF_ERROR(SetRing(*newest));
    changed = true;
  }
  return changed;
}

absl::StatusOr<v1::DataNodeScrubReport> DataNodePool::Scrub(uint32_t node, bool start) {
  v1::DataNodeScrubRequest req;
  req.set_start(start);
  v1::DataNodeScrubReport resp;
  RC_RETURN_IF_ERROR(OnNode(node, "scrub report of", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.Scrub(ctx, req, &resp);
  }));
  return resp;
}

absl::StatusOr<bool> DataNodePool::RepairBlockOn(uint32_t node, uint32_t vdi, uint64_t object,
                                                 uint32_t block, int n, uint32_t block_size) {
  const auto v = view();
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, WriteHomesIn(*v, vdi, object, n));
  if (std::find(homes.begin(), homes.end(), node) == homes.end()) {
    RC_RETURN_IF_ERROR(PurgeBlocks(node, vdi, object, block, 1));
    return true;
  }
  // The newest good copy among the other homes that answer.
  std::optional<v1::ReadBlocksResponse> best;
  absl::Status last = absl::OkStatus();
  for (uint32_t id : homes) {
    if (id == node) continue;
    Node* h = v->Find(id);
    if (h == nullptr) continue;
    v1::ReadBlocksRequest req;
    req.mutable_range()->set_vdi_id(vdi);
    req.mutable_range()->set_object_index(object);
    req.mutable_range()->set_first_block(block);
    req.mutable_range()->set_block_count(1);
    v1::ReadBlocksResponse resp;
    auto ctx = Context();
    grpc::Status s = h->stub->ReadBlocks(ctx.get(), req, &resp);
    Note(h, s);
    if (!s.ok()) {
      if (s.error_code() != grpc::StatusCode::DATA_LOSS) {
        last = FromGrpc(s, absl::StrCat("read from data node ", id));
      }
      continue;
    }
    if (resp.present_size() != 1 || !resp.present(0) ||
        resp.data().size() != block_size) {
      continue;
    }
    if (!best || VersionIn(resp, 0).Key() > VersionIn(*best, 0).Key()) best = std::move(resp);
  }
  if (!best) {
    // A home that did not answer may hold a good copy: try again later.
    if (!last.ok()) return last;
    return false;
  }
  if (!RepairFrom(*v, node, vdi, object, block, 0, block_size, *best, false)) {
    return absl::UnavailableError(absl::StrCat("repair write to data node ", node, " failed"));
  }
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
    auto ctx = Context();
    const auto start = std::chrono::steady_clock::now();
    node->inflight.fetch_add(1);
    grpc::Status s = node->stub->ReadBlocks(ctx.get(), req, &resp);
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
  v1::WriteBlocksRequest req;
  req.mutable_range()->set_vdi_id(vdi);
  req.mutable_range()->set_object_index(object);
  req.mutable_range()->set_first_block(first);
  req.set_data(data);
  if (stamp != nullptr) {
    req.set_writer_node(stamp->writer);
    for (uint64_t s : stamp->seqs) req.add_versions(s);
    for (uint64_t e : stamp->epochs) req.add_epochs(e);
    req.set_only_if_newer(stamp->only_if_newer);
  }
  struct Call {
    std::unique_ptr<grpc::ClientContext> ctx;
    v1::WriteBlocksResponse resp;
    grpc::Status status;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Call> calls(homes.size());
  absl::BlockingCounter pending(static_cast<int>(homes.size()));
  for (size_t i = 0; i < homes.size(); ++i) {
    Node* node = v->Find(homes[i]);
    calls[i].ctx = Context();
    calls[i].start = std::chrono::steady_clock::now();
    node->inflight.fetch_add(1);
    node->stub->async()->WriteBlocks(calls[i].ctx.get(), &req, &calls[i].resp,
                                     [&, i, node](grpc::Status s) {
                                       Note(node, s);
                                       calls[i].status = std::move(s);
                                       node->inflight.fetch_sub(1);
                                       Observe(node, Seconds(calls[i].start));
                                       pending.DecrementCount();
                                     });
  }
  pending.Wait();
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

std::vector<uint32_t> DataNodePool::LogCandidatesIn(const View& v, uint32_t vdi, uint64_t object,
                                                    int n) {
  const int total = static_cast<int>(v.ring_members.size());
  n = std::min(n, total);
  auto order = v.ring->Owners(ring::ObjectKey{vdi, object}, total);
  if (!order.ok()) return {};
  // docs/design.md §4: log copies live outside the object's N homes, on the next nodes of the data
  // ring; only when the cluster is too small do they fall back on the homes (last home first).
  std::vector<uint32_t> out(order->begin() + n, order->end());
  for (int i = n - 1; i >= 0; --i) out.push_back((*order)[i]);
  std::erase_if(out, [&v](uint32_t id) { return v.spec.IsOut(id); });
  return out;
}

absl::StatusOr<LogAppendResult> DataNodePool::LogAppend(
    uint32_t vdi, uint64_t object, int n, int copies, const v1::LogAppendRequest& req,
    const std::function<void()>& overlap) {
  LogAppendResult result;
  if (copies <= 0 || req.records_size() == 0) {
    if (overlap) overlap();
    return result;
  }
  const auto v = view();
  std::vector<uint32_t> cand = LogCandidatesIn(*v, vdi, object, n);
  // Nodes that failed in the last second go last, so one dead node does not cost every write a
  // timeout (the order stays deterministic among healthy nodes).
  const int64_t now = NowMs();
  std::stable_partition(cand.begin(), cand.end(), [&](uint32_t id) {
    const Node* n = v->Find(id);
    return n->down_since_ms.load() == 0 && now - n->failed_at_ms.load() > 1000;
  });
  struct Call {
    LogWaiter waiter;
    bool over_limit = false;
    grpc::Status status;
  };
  absl::Status last = absl::UnavailableError("no data node to hold the log records");
  bool overlapped = false;
  // Candidates that answered UNAVAILABLE: a connection reset, a node restarting. Asked again
  // below when the others are not enough (an append is idempotent: records are keyed by
  // writer and sequence).
  std::vector<uint32_t> unavailable;
  // A data node refused the records: the writer's log was sealed for a replay (it lost its
  // objects). No other node may take them instead: the write fails.
  absl::Status sealed;
  // Appends to `cand` in order, `copies` at a time, until enough nodes hold the records.
  auto append_to = [&](const std::vector<uint32_t>& cand) {
    size_t next = 0;
    while (static_cast<int>(result.nodes.size()) < copies && next < cand.size() && sealed.ok()) {
      const size_t want = std::min<size_t>(copies - result.nodes.size(), cand.size() - next);
      std::vector<Call> calls(want);
      std::vector<uint32_t> ids(cand.begin() + next, cand.begin() + next + want);
      next += want;
      absl::BlockingCounter pending(static_cast<int>(want));
      for (size_t i = 0; i < want; ++i) {
        Node* node = v->Find(ids[i]);
        node->inflight.fetch_add(1);
        const auto start = std::chrono::steady_clock::now();
        calls[i].waiter.req = &req;
        calls[i].waiter.done = [&, i, node, start](const grpc::Status& s, bool over_limit) {
          calls[i].status = s;
          calls[i].over_limit = over_limit;
          node->inflight.fetch_sub(1);
          Observe(node, Seconds(start));
          pending.DecrementCount();
        };
        SendLog(node, &calls[i].waiter);
      }
      if (!overlapped && overlap) {  // while the first round is in flight
        overlapped = true;
        overlap();
      }
      pending.Wait();
      for (size_t i = 0; i < want; ++i) {
        if (!calls[i].status.ok()) {
          last = FromGrpc(calls[i].status, absl::StrCat("log append on data node ", ids[i]));
          if (IsKind(last, ErrorKind::kLogSealed)) sealed = last;
          if (calls[i].status.error_code() == grpc::StatusCode::UNAVAILABLE) {
            unavailable.push_back(ids[i]);
          }
          continue;
        }
        result.nodes.push_back(ids[i]);
        result.over_limit |= calls[i].over_limit;
      }
    }
  };
  append_to(cand);
  // A transient fault is retried, not reported: the nodes that were unavailable get two more
  // tries on fresh connections (gRPC reconnects) before the write fails.
  for (const absl::Duration pause : {absl::Milliseconds(20), absl::Milliseconds(200)}) {
    if (static_cast<int>(result.nodes.size()) >= copies || unavailable.empty() || !sealed.ok()) {
      break;
    }
    absl::SleepFor(pause);
    std::vector<uint32_t> again;
    again.swap(unavailable);
    if (log_retries_ != nullptr) log_retries_->Increment(again.size());
    append_to(again);
  }
  if (!overlapped && overlap) overlap();  // no candidate at all
  if (!sealed.ok()) return sealed;
  if (static_cast<int>(result.nodes.size()) < copies) {
    return absl::UnavailableError(absl::StrCat("log records on ", result.nodes.size(), " of ",
                                               copies, " data nodes: ", last.message()));
  }
  // Overlap: a holder that is one of the object's homes.
  auto homes = HomesIn(*v, vdi, object, n);
  if (homes.ok()) {
    for (uint32_t id : result.nodes) {
      if (std::find(homes->begin(), homes->end(), id) != homes->end()) ++result.overlapping;
    }
  }
  return result;
}

namespace {
// Largest data of one group-committed LogAppend call (gRPC's default message limit is 4 MiB).
constexpr size_t kLogBatchBytes = 2 << 20;
}  // namespace

void DataNodePool::SendLog(Node* node, LogWaiter* w) {
  {
    absl::MutexLock l(&node->log_mu);
    node->log_queue.push_back(w);
    if (node->log_sending) return;  // the call in flight sends it next
    node->log_sending = true;
  }
  SendLogBatch(node);
}

void DataNodePool::SendLogBatch(Node* node) {
  struct Batch {
    std::unique_ptr<grpc::ClientContext> ctx;
    v1::LogAppendRequest req;
    v1::LogAppendResponse resp;
    std::vector<LogWaiter*> waiters;
  };
  auto batch = std::make_shared<Batch>();
  {
    absl::MutexLock l(&node->log_mu);
    size_t bytes = 0, take = 0;
    for (; take < node->log_queue.size(); ++take) {
      const size_t b = node->log_queue[take]->req->ByteSizeLong();
      if (take > 0 && bytes + b > kLogBatchBytes) break;
      bytes += b;
    }
    if (take == 0) {
      node->log_sending = false;
      return;
    }
    batch->waiters.assign(node->log_queue.begin(), node->log_queue.begin() + take);
    node->log_queue.erase(node->log_queue.begin(), node->log_queue.begin() + take);
  }
  // A lone append goes as its caller built it (the caller waits for `done`, so it outlives the
  // call); only a group is merged into one request.
  const v1::LogAppendRequest* req = batch->waiters[0]->req;
  if (batch->waiters.size() > 1) {
    for (LogWaiter* w : batch->waiters) {
      batch->req.mutable_records()->MergeFrom(w->req->records());
    }
    req = &batch->req;
  }
  auto finish = [this, node, batch](grpc::Status s) {
    Note(node, s);
    // Pick the next batch before waking this one's callers: once they return, nothing may
    // touch this pool unless other callers still wait (then it is alive).
    bool more;
    {
      absl::MutexLock l(&node->log_mu);
      more = !node->log_queue.empty();
      if (!more) node->log_sending = false;
    }
    for (LogWaiter* w : batch->waiters) w->done(s, batch->resp.over_limit());
    if (more) SendLogBatch(node);
  };
  if (log_fault_for_test_) {
    if (grpc::Status injected = log_fault_for_test_(node->endpoint.id); !injected.ok()) {
      finish(injected);
      return;
    }
  }
  batch->ctx = Context();
  if (node->log_calls != nullptr) node->log_calls->Increment();
  node->stub->async()->LogAppend(batch->ctx.get(), req, &batch->resp, std::move(finish));
}

std::vector<uint32_t> DataNodePool::LogReclaim(uint32_t cache_node,
                                               const std::vector<uint64_t>& seqs, uint64_t below) {
  std::vector<uint32_t> failed;
  if (seqs.empty() && below == 0) return failed;
  v1::LogReclaimRequest req;
  req.set_cache_node_id(cache_node);
  for (uint64_t s : seqs) req.add_sequences(s);
  req.set_below_sequence(below);
  req.mutable_fence()->set_term(control_term());
  const auto v = view();
  // Out nodes are skipped: they keep their stale records until they are cleared to rejoin.
  const std::vector<Node*>& nodes = v->live;
  const std::vector<grpc::Status> got =
      CallEach(nodes, [&req](Node* node, grpc::ClientContext* ctx, Done done) {
        auto resp = std::make_shared<v1::LogReclaimResponse>();
        node->stub->async()->LogReclaim(ctx, &req, resp.get(),
                                        [resp, done](grpc::Status s) { done(std::move(s)); });
      });
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!got[i].ok()) failed.push_back(nodes[i]->endpoint.id);
  }
  return failed;
}

absl::Status DataNodePool::SealLog(uint32_t cache_node, uint64_t below_epoch) {
  v1::SealLogRequest req;
  req.set_cache_node_id(cache_node);
  req.set_below_epoch(below_epoch);
  req.mutable_fence()->set_term(control_term());
  req.mutable_fence()->set_epoch(below_epoch);
  const auto v = view();
  // Every node of the ring(s), out ones too (a writer on an older data ring may still send to
  // them); only the live ones, which the replay scans, must take it.
  const std::vector<Node*>& nodes = v->nodes;
  const std::vector<grpc::Status> got =
      CallEach(nodes, [&req](Node* node, grpc::ClientContext* ctx, Done done) {
        auto resp = std::make_shared<v1::SealLogResponse>();
        node->stub->async()->SealLog(ctx, &req, resp.get(),
                                     [resp, done](grpc::Status s) { done(std::move(s)); });
      });
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (got[i].ok() || v->spec.IsOut(nodes[i]->endpoint.id)) continue;
    return FromGrpc(got[i], absl::StrCat("seal the log of cache node ", cache_node,
                                         " on data node ", nodes[i]->endpoint.id));
  }
  return absl::OkStatus();
}

std::vector<grpc::Status> DataNodePool::CallEach(
    const std::vector<Node*>& nodes,
    const std::function<void(Node*, grpc::ClientContext*, Done)>& start) {
  std::vector<grpc::Status> statuses(nodes.size());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(nodes.size());
  absl::BlockingCounter pending(static_cast<int>(nodes.size()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    contexts[i] = Context();
    start(nodes[i], contexts[i].get(), [&statuses, &pending, i](grpc::Status s) {
      statuses[i] = std::move(s);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  for (size_t i = 0; i < nodes.size(); ++i) Note(nodes[i], statuses[i]);
  return statuses;
}

absl::Status DataNodePool::LogScan(uint32_t node, uint32_t cache_node, uint64_t from,
                                   bool include_data,
                                   const std::function<void(v1::LogRecord&)>& fn,
                                   std::vector<uint64_t>* corrupt) {
  const auto v = view();
  Node* n = v->Find(node);
  if (n == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown data node ", node));
  for (;;) {
    v1::LogScanRequest req;
    req.set_cache_node_id(cache_node);
    req.set_from_sequence(from);
    req.set_limit(include_data ? 256 : 4096);
    req.set_include_data(include_data);
    v1::LogScanResponse resp;
    auto ctx = Context();
    grpc::Status s = n->stub->LogScan(ctx.get(), req, &resp);
    Note(n, s);
    if (!s.ok()) {
      return FromGrpc(s, absl::StrCat("log scan on data node ", node));
    }
    for (auto& r : *resp.mutable_records()) fn(r);
    if (corrupt != nullptr) {
      corrupt->insert(corrupt->end(), resp.corrupt_sequences().begin(),
                      resp.corrupt_sequences().end());
    }
    if (resp.done() || resp.next_sequence() <= from) return absl::OkStatus();
    from = resp.next_sequence();
  }
}

absl::StatusOr<v1::LogRecord> DataNodePool::FetchLogRecord(uint32_t cache_node, uint64_t seq) {
  absl::Status last = absl::NotFoundError(
      absl::StrCat("log record ", seq, " of cache node ", cache_node, " is on no data node"));
  const auto v = view();  // held for the loop: the pool may swap its view
  for (Node* n : v->live) {
    v1::LogScanRequest req;
    req.set_cache_node_id(cache_node);
    req.set_from_sequence(seq);
    req.set_limit(1);
    req.set_include_data(true);
    v1::LogScanResponse resp;
    auto ctx = Context();
    grpc::Status s = n->stub->LogScan(ctx.get(), req, &resp);
    if (!s.ok()) {
      last = FromGrpc(s, absl::StrCat("log fetch on data node ", n->endpoint.id));
      continue;
    }
    if (resp.records_size() == 1 && resp.records(0).sequence() == seq &&
        BlockChecksum(resp.records(0).data()) == resp.records(0).checksum()) {
      return std::move(*resp.mutable_records(0));
    }
  }
  return last;
}

template <typename Call>
absl::Status DataNodePool::OnNode(uint32_t node, const char* what, Call&& call) {
  const auto v = view();
  Node* n = v->Find(node);
  if (n == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown data node ", node));
  auto ctx = Context();
  grpc::Status s = call(*n->stub, ctx.get());
  Note(n, s);
  return FromGrpc(s, absl::StrCat(what, " data node ", node));
}

absl::StatusOr<BlockScanPage> DataNodePool::ScanBlocks(uint32_t node, ring::ObjectKey from,
                                                       uint32_t from_block, uint32_t limit,
                                                       bool include_data) {
  v1::ScanBlocksRequest req;
  req.set_vdi_id(from.vdi_id);
  req.set_object_index(from.object_index);
  req.set_block_index(from_block);
  req.set_limit(limit);
  req.set_include_data(include_data);
  v1::ScanBlocksResponse resp;
  RC_RETURN_IF_ERROR(OnNode(node, "block scan on", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.ScanBlocks(ctx, req, &resp);
  }));
  BlockScanPage page;
  page.blocks.assign(std::make_move_iterator(resp.mutable_blocks()->begin()),
                     std::make_move_iterator(resp.mutable_blocks()->end()));
  page.done = resp.done();
  page.next_object = ring::ObjectKey{resp.next_vdi_id(), resp.next_object_index()};
  page.next_block = resp.next_block_index();
  return page;
}

absl::StatusOr<uint32_t> DataNodePool::CopyBlocks(uint32_t node, uint32_t vdi, uint64_t object,
                                                  uint32_t first, const std::string& data,
                                                  const HomeStamp& stamp) {
  v1::WriteBlocksRequest req;
  req.mutable_range()->set_vdi_id(vdi);
  req.mutable_range()->set_object_index(object);
  req.mutable_range()->set_first_block(first);
  req.set_data(data);
  req.set_writer_node(stamp.writer);
  for (uint64_t seq : stamp.seqs) req.add_versions(seq);
  for (uint64_t e : stamp.epochs) req.add_epochs(e);
  req.set_only_if_absent(true);
  v1::WriteBlocksResponse resp;
  RC_RETURN_IF_ERROR(OnNode(node, "copy to", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.WriteBlocks(ctx, req, &resp);
  }));
  return resp.blocks_stored();
}

absl::Status DataNodePool::PurgeBlocks(uint32_t node, uint32_t vdi, uint64_t object,
                                       uint32_t first, uint32_t count) {
  v1::TrimBlocksRequest req;
  req.mutable_range()->set_vdi_id(vdi);
  req.mutable_range()->set_object_index(object);
  req.mutable_range()->set_first_block(first);
  req.mutable_range()->set_block_count(count);
  req.set_purge(true);
  v1::TrimBlocksResponse resp;
  return OnNode(node, "purge on", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.TrimBlocks(ctx, req, &resp);
  });
}

absl::StatusOr<uint64_t> DataNodePool::BlockCount(uint32_t node) {
  v1::StatsRequest req;
  v1::StatsResponse resp;
  RC_RETURN_IF_ERROR(OnNode(node, "stats of", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.Stats(ctx, req, &resp);
  }));
  return resp.blocks();
}

absl::Status DataNodePool::PutVdiOn(uint32_t node, const v1::VdiGeometry& vdi, bool complete) {
  v1::PutVdiRequest req;
  *req.mutable_vdi() = vdi;
  req.set_complete(complete);
  v1::PutVdiResponse resp;
  return OnNode(node, "register VDI on", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.PutVdi(ctx, req, &resp);
  });
}

absl::StatusOr<NodeVdis> DataNodePool::VdisOn(uint32_t node) {
  v1::StatsRequest req;
  req.set_include_vdis(true);
  v1::StatsResponse resp;
  RC_RETURN_IF_ERROR(OnNode(node, "VDIs of", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.Stats(ctx, req, &resp);
  }));
  NodeVdis out;
  for (const v1::VdiGeometry& g : resp.vdi_list()) out.known.insert(g.vdi_id());
  out.incomplete.insert(resp.incomplete_vdis().begin(), resp.incomplete_vdis().end());
  return out;
}

absl::StatusOr<WriterState> DataNodePool::QueryWriter(uint32_t writer) {
  WriterState out;
  for (uint32_t node : node_ids()) {
    v1::StatsRequest req;
    req.set_writer(writer);
    req.set_include_vdis(true);
    v1::StatsResponse resp;
    RC_RETURN_IF_ERROR(OnNode(node, "sequence mark of", [&](auto& stub, grpc::ClientContext* ctx) {
      return stub.Stats(ctx, req, &resp);
    }));
    out.high_water = std::max<uint64_t>(out.high_water, resp.writer_high_water());
    for (const v1::VdiGeometry& g : resp.vdi_list()) out.replication[g.vdi_id()] = g.replication();
  }
  return out;
}

void DataNodePool::StatsOfLive(
    const View& v, const v1::StatsRequest& req, int seconds,
    const std::function<bool(uint32_t, const grpc::Status&, const v1::StatsResponse&)>& each) {
  for (Node* n : v.live) {
    v1::StatsResponse resp;
    auto ctx = Context();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
    grpc::Status s = n->stub->Stats(ctx.get(), req, &resp);
    Note(n, s);
    if (!each(n->endpoint.id, s, resp)) return;
  }
}

absl::flat_hash_map<uint32_t, std::string> DataNodePool::WriterIncarnations(uint32_t writer) {
  absl::flat_hash_map<uint32_t, std::string> out;
  v1::StatsRequest req;
  req.set_writer(writer);
  StatsOfLive(*view(), req, 3,
              [&out](uint32_t id, const grpc::Status& s, const v1::StatsResponse& resp) {
                if (s.ok()) out[id] = resp.writer_incarnation();
                return true;
              });
  return out;
}

std::optional<uint64_t> DataNodePool::ClientOps() {
  uint64_t sum = 0;
  bool all = true;
  StatsOfLive(*view(), v1::StatsRequest(), 1,
              [&](uint32_t, const grpc::Status& s, const v1::StatsResponse& resp) {
                all = s.ok();
                sum += resp.client_ops();
                return all;
              });
  if (!all) return std::nullopt;
  return sum;
}

absl::Status DataNodePool::PutWriterIncarnation(uint32_t writer, const std::string& incarnation,
                                                bool only_if_none) {
  v1::PutWriterIncarnationRequest req;
  req.set_writer(writer);
  req.set_incarnation(incarnation);
  req.set_only_if_none(only_if_none);
  const auto v = view();  // held for the loop: the pool may swap its view
  for (Node* n : v->live) {
    v1::PutWriterIncarnationResponse resp;
    auto ctx = Context();
    if (only_if_none) {
      ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    }
    grpc::Status s = n->stub->PutWriterIncarnation(ctx.get(), req, &resp);
    Note(n, s);
    if (!s.ok() && !only_if_none) {
      return FromGrpc(s, absl::StrCat("record the store incarnation of cache node ", writer,
                                      " on data node ", n->endpoint.id));
    }
  }
  return absl::OkStatus();
}

}  // namespace ringcache::datanode
