// The pool's per-node operations: health probes, the kept data ring, scrub reports and
// repairs, block scans, copies and purges for rebalancing, VDIs, writer marks and incarnations.
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/formats.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "datanode/client/datanode_pool.h"
#include "datanode/client/pool_internal.h"

namespace ringcache::datanode {

using pool_internal::NowMs;
using pool_internal::Seconds;
using pool_internal::Unreachable;
using pool_internal::VersionIn;

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
  req.set_api_version(kNodeApiFormat.writes);
  absl::BlockingCounter pending(static_cast<int>(nodes.size()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    calls[i].ctx.set_deadline(std::chrono::system_clock::now() +
                              std::chrono::milliseconds(timeout_ms));
    nodes[i]->stub->async()->Health(&calls[i].ctx, &req, &calls[i].resp, [&, i](grpc::Status st) {
      calls[i].status = std::move(st);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (calls[i].status.ok()) {
      // A node that does not speak this release's API is as good as unreachable: nothing it
      // answers could be read right. Said once, when it goes down for it.
      absl::Status api = CheckPeerApi(calls[i].resp.api_version(),
                                      absl::StrCat("data node ", nodes[i]->endpoint.id));
      if (!api.ok()) {
        if (nodes[i]->down_since_ms.load() == 0) spdlog::error("{}", std::string(api.message()));
        calls[i].status = grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(api.message()));
      }
    }
    Note(nodes[i], calls[i].status);
    Node* n = nodes[i];
    if (calls[i].status.ok() && n->log_link != nullptr) {
      for (LogLink* link : {n->log_link.get(), n->store_link.get(), n->load_link.get()}) {
        link->SetPort(static_cast<int>(calls[i].resp.log_port()),
                      calls[i].resp.store_incarnation(), calls[i].resp.api_version());
      }
    }
    const std::string& inc = calls[i].resp.store_incarnation();
    if (!calls[i].status.ok() || inc.empty()) continue;
    absl::MutexLock l(&n->store_mu);
    if (!n->store_incarnation.empty() && n->store_incarnation != inc) {
      n->store_changes.fetch_add(1);
      spdlog::warn(
          "data node {} came back with another store (incarnation {} -> {}): a new or "
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
    if (resp.present_size() != 1 || !resp.present(0) || resp.data().size() != block_size) {
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
  RC_ASSIGN_OR_RETURN(uint64_t stored, CopyBlocksAll({{node, vdi, object, first, &data, stamp}}));
  return static_cast<uint32_t>(stored);
}

absl::StatusOr<uint64_t> DataNodePool::CopyBlocksAll(const std::vector<BlockCopy>& copies) {
  const auto v = view();
  uint64_t stored = 0;
  for (size_t at = 0; at < copies.size(); at += kCopyWindow) {
    const size_t n = std::min(kCopyWindow, copies.size() - at);
    std::vector<Node*> nodes(n);
    std::vector<v1::WriteBlocksRequest> reqs(n);
    std::vector<v1::WriteBlocksResponse> resps(n);
    for (size_t i = 0; i < n; ++i) {
      const BlockCopy& c = copies[at + i];
      nodes[i] = v->Find(c.node);
      if (nodes[i] == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unknown data node ", c.node));
      }
      v1::WriteBlocksRequest& req = reqs[i];
      req.mutable_range()->set_vdi_id(c.vdi);
      req.mutable_range()->set_object_index(c.object);
      req.mutable_range()->set_first_block(c.first);
      req.set_data(*c.data);
      req.set_writer_node(c.stamp.writer);
      for (uint64_t seq : c.stamp.seqs) req.add_versions(seq);
      for (uint64_t e : c.stamp.epochs) req.add_epochs(e);
      req.set_only_if_absent(true);
    }
    const std::vector<grpc::Status> got =
        CallEach(nodes, [&](size_t i, Node* node, grpc::ClientContext* ctx, Done done) {
          node->stub->async()->WriteBlocks(ctx, &reqs[i], &resps[i], std::move(done));
        });
    for (size_t i = 0; i < n; ++i) {
      RC_RETURN_IF_ERROR(FromGrpc(got[i], absl::StrCat("copy to data node ", copies[at + i].node)));
      stored += resps[i].blocks_stored();
    }
  }
  return stored;
}

absl::Status DataNodePool::PurgeBlocks(uint32_t node, uint32_t vdi, uint64_t object, uint32_t first,
                                       uint32_t count) {
  return PurgeBlocksAll(node, {{vdi, object, first, count}});
}

absl::Status DataNodePool::PurgeBlocksAll(uint32_t node, const std::vector<BlockSpan>& spans) {
  const auto v = view();
  Node* target = v->Find(node);
  if (target == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("unknown data node ", node));
  for (size_t at = 0; at < spans.size(); at += kCopyWindow) {
    const size_t n = std::min(kCopyWindow, spans.size() - at);
    std::vector<v1::TrimBlocksRequest> reqs(n);
    std::vector<v1::TrimBlocksResponse> resps(n);
    for (size_t i = 0; i < n; ++i) {
      const BlockSpan& span = spans[at + i];
      reqs[i].mutable_range()->set_vdi_id(span.vdi);
      reqs[i].mutable_range()->set_object_index(span.object);
      reqs[i].mutable_range()->set_first_block(span.first);
      reqs[i].mutable_range()->set_block_count(span.count);
      reqs[i].set_purge(true);
    }
    const std::vector<grpc::Status> got =
        CallEach(std::vector<Node*>(n, target),
                 [&](size_t i, Node* nd, grpc::ClientContext* ctx, Done done) {
                   nd->stub->async()->TrimBlocks(ctx, &reqs[i], &resps[i], std::move(done));
                 });
    for (const grpc::Status& s : got) {
      RC_RETURN_IF_ERROR(FromGrpc(s, absl::StrCat("purge on data node ", node)));
    }
  }
  return absl::OkStatus();
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
  return OnNode(node, "register VDI on",
                [&](auto& stub, grpc::ClientContext* ctx) { return stub.PutVdi(ctx, req, &resp); });
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
