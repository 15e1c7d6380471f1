#include "tools/ctl/restore.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/formats.h"
#include "common/grpc_channel.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "coordinator/election.h"
#include "coordinator/etcd_state.h"
#include "membership/cache_ring_state.h"
#include "membership/etcd_value.h"
#include "membership/feature_level.h"
#include "ringcache/v1/cachenode.grpc.pb.h"
#include "ringcache/v1/datanode.grpc.pb.h"
#include "tools/ctl/backup.h"

namespace ringcache::ctl {
namespace {

using coordinator::VdiRecord;

// What one data node said (answered false: `error` says why not).
struct DataNodeView {
  uint32_t id = 0;
  std::string address;
  bool answered = false;
  std::string error;
  uint64_t term = 0;
  std::optional<datanode::DataRing> ring;
  std::vector<v1::VdiGeometry> vdis;
};

struct CacheNodeView {
  uint32_t id = 0;
  std::string address;
  bool answered = false;
  std::string error;
  uint64_t epoch = 0;
  uint64_t term = 0;
};

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

DataNodeView AskDataNode(uint32_t id, const std::string& address, absl::Duration timeout) {
  DataNodeView v;
  v.id = id;
  v.address = address;
  auto stub = v1::DataNode::NewStub(PeerChannel(address, tls::kRoleDataNode));
  // Health first: it says the node's API version (Stats does not).
  grpc::ClientContext hctx;
  SetDeadline(&hctx, timeout);
  v1::HealthRequest hreq;
  hreq.set_api_version(kNodeApiFormat.writes);
  v1::HealthResponse health;
  grpc::Status st = stub->Health(&hctx, hreq, &health);
  if (!st.ok()) {
    v.error = st.error_message();
    return v;
  }
  if (absl::Status api = CheckPeerApi(health.api_version(), absl::StrCat("data node ", id));
      !api.ok()) {
    v.error = std::string(api.message());
    return v;
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  v1::StatsRequest req;
  req.set_include_vdis(true);
  req.set_include_ring(true);
  v1::StatsResponse resp;
  st = stub->Stats(&ctx, req, &resp);
  if (!st.ok()) {
    v.error = st.error_message();
    return v;
  }
  v.answered = true;
  v.term = resp.control_term();
  v.vdis.assign(resp.vdi_list().begin(), resp.vdi_list().end());
  v1::DataRing ring;
  if (resp.ring_epoch() != 0 && ring.ParseFromString(resp.ring())) {
    v.ring = datanode::DataRing::FromProto(ring);
  }
  return v;
}

CacheNodeView AskCacheNode(uint32_t id, const std::string& address, absl::Duration timeout) {
  CacheNodeView v;
  v.id = id;
  v.address = address;
  auto stub = v1::CacheNode::NewStub(PeerChannel(address, tls::kRoleCacheNode));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  v1::CacheStatsRequest req;
  req.set_api_version(kNodeApiFormat.writes);
  v1::CacheStatsResponse resp;
  grpc::Status st = stub->Stats(&ctx, req, &resp);
  if (!st.ok()) {
    v.error = st.error_message();
    return v;
  }
  if (absl::Status api = CheckPeerApi(resp.api_version(), absl::StrCat("cache node ", id));
      !api.ok()) {
    v.error = std::string(api.message());
    return v;
  }
  v.answered = true;
  v.epoch = resp.epoch();
  v.term = resp.control_term();
  return v;
}

// The nodes of one role etcd knows: registered now, or named by a ring it holds.
std::map<uint32_t, std::string> NodesOf(const EtcdSummary& s, membership::Role role) {
  std::map<uint32_t, std::string> out;
  for (const membership::NodeRecord& n : s.nodes) {
    if (n.role == role) out[n.id] = n.address;
  }
  return out;
}

// Repairs the catalog from what the data nodes know, reporting each change on `out`.
absl::Status RepairCatalog(membership::EtcdClient* etcd, const RestoreOptions& o,
                           const EtcdSummary& s, const std::vector<DataNodeView>& data,
                           std::ostream* out, std::ostream* err) {
  coordinator::EtcdCatalogStore catalog(etcd, o.prefix);
  std::map<uint32_t, VdiRecord> by_id;
  std::set<std::string> names;
  for (const VdiRecord& r : s.vdis) {
    by_id[r.geometry.vdi_id()] = r;
    names.insert(r.geometry.name());
  }
  // Every VDI the data nodes know, by id, at its largest size.
  std::map<uint32_t, v1::VdiGeometry> known;
  bool all_answered = !data.empty();
  for (const DataNodeView& d : data) {
    all_answered = all_answered && d.answered;
    for (const v1::VdiGeometry& g : d.vdis) {
      auto [it, fresh] = known.emplace(g.vdi_id(), g);
      if (!fresh && g.size_bytes() > it->second.size_bytes()) it->second = g;
    }
  }
  uint32_t next_id = s.next_vdi_id;
  for (const auto& [id, g] : known) next_id = std::max(next_id, id + 1);
  int added = 0, resized = 0, removed = 0;
  // Removals first: a VDI deleted after the backup and created again under its name has a new
  // id, and its name must be free when it is added back.
  for (const auto& [id, r] : by_id) {
    if (known.count(id) > 0) continue;
    if (!all_answered) {
      *err << "ringcachectl: restore: VDI '" << r.geometry.name() << "' (id " << id
           << ") is known to no data node that answered; kept, since not every data node "
              "answered (run restore again once they are up)\n";
      continue;
    }
    *out << "  VDI '" << r.geometry.name() << "' (id " << id
         << "): known to no data node (deleted after the backup: its data is gone); removed\n";
    if (!o.dry_run) RC_RETURN_IF_ERROR(catalog.Remove(r.geometry.name()));
    names.erase(r.geometry.name());
    ++removed;
  }
  for (const auto& [id, g] : known) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      VdiRecord r;
      r.geometry = g;
      if (names.count(g.name()) > 0) r.geometry.set_name(absl::StrCat(g.name(), "-restored-", id));
      names.insert(r.geometry.name());
      *out << "  VDI '" << r.geometry.name() << "' (id " << id << ", " << g.size_bytes()
           << " bytes): created after the backup; added back from the data nodes (cache mode "
              "writeback, the nodes' default policy, no access limits: set them again)\n";
      if (!o.dry_run) RC_RETURN_IF_ERROR(catalog.Put(r, next_id));
      ++added;
    } else if (g.size_bytes() > it->second.geometry.size_bytes()) {
      VdiRecord r = it->second;
      *out << "  VDI '" << r.geometry.name() << "' (id " << id << "): resized after the backup; "
           << r.geometry.size_bytes() << " -> " << g.size_bytes() << " bytes\n";
      r.geometry.set_size_bytes(g.size_bytes());
      if (!o.dry_run) RC_RETURN_IF_ERROR(catalog.Put(r, next_id));
      ++resized;
    }
  }
  if (next_id != s.next_vdi_id && !o.dry_run) {
    RC_RETURN_IF_ERROR(
        etcd->Put(coordinator::VdiNextIdKey(o.prefix), membership::EncodeNumberValue(next_id))
            .status());
  }
  *out << "catalog: " << s.vdis.size() << " VDI(s) in the backup, " << known.size()
       << " on the data nodes: " << added << " added, " << resized << " resized, " << removed
       << " removed; next VDI id " << s.next_vdi_id << " -> " << next_id << "\n";
  return absl::OkStatus();
}

// Raises etcd's revision (the next coordinator's term) above `term`. Returns the writes made.
// With `dry_run`, only reads the revision.
absl::StatusOr<int64_t> RaiseRevision(membership::EtcdClient* etcd, const std::string& prefix,
                                      int64_t term, bool dry_run, int64_t* revision) {
  const std::string key = absl::StrCat(prefix, "/cluster/restore-revision");
  if (dry_run) {
    RC_ASSIGN_OR_RETURN(membership::RangeResult r, etcd->GetPrefix(key));
    *revision = r.revision;
    return int64_t{0};
  }
  RC_ASSIGN_OR_RETURN(*revision, etcd->Put(key, membership::EncodeNumberValue(0)));
  int64_t writes = 1;
  while (*revision <= term) {
    RC_ASSIGN_OR_RETURN(*revision, etcd->Put(key, membership::EncodeNumberValue(writes)));
    ++writes;
  }
  RC_RETURN_IF_ERROR(etcd->Delete(key).status());
  return writes;
}

absl::Status RestoreSteps(membership::EtcdClient* etcd, const RestoreOptions& o,
                          std::ostream* out, std::ostream* err);

}  // namespace

absl::Status Restore(membership::EtcdClient* etcd, const RestoreOptions& o, std::ostream* out,
                     std::ostream* err) {
  absl::Status s = RestoreSteps(etcd, o, out, err);
  if (!s.ok() && !o.dry_run && !absl::IsInvalidArgument(s) && !absl::IsFailedPrecondition(s)) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (", coordinator::RestoreMarkKey(
                                                                      o.prefix),
                                               " stays in etcd if it was written: no coordinator "
                                               "is elected until a restore completes; run "
                                               "restore again)"));
  }
  return s;
}

namespace {

absl::Status RestoreSteps(membership::EtcdClient* etcd, const RestoreOptions& o,
                          std::ostream* out, std::ostream* err) {
  RC_ASSIGN_OR_RETURN(BackupManifest manifest, ReadBackupManifest(o.dir));
  *out << "restore: backup taken " << manifest.created << " by release " << manifest.release
       << " (snapshot sha256 " << manifest.snapshot_sha256.substr(0, 16) << "...)"
       << (o.dry_run ? "; dry run: nothing is changed" : "") << "\n";
  // What this restore writes to etcd follows the snapshot's feature level (etcd_value.h).
  RC_RETURN_IF_ERROR(membership::ReadFeatureLevel(etcd, o.prefix).status());
  if (!o.dry_run) {
    // No coordinator while the state is repaired: the mark keeps any from being elected, and
    // the one the snapshot names (if its lease still runs) loses its key.
    RC_RETURN_IF_ERROR(
        etcd->Put(coordinator::RestoreMarkKey(o.prefix),
                  membership::EncodeMarkValue(absl::StrCat("ringcachectl restore ", o.dir)))
            .status());
    RC_RETURN_IF_ERROR(etcd->Delete(coordinator::CoordinatorKey(o.prefix)).status());
  }
  RC_ASSIGN_OR_RETURN(EtcdSummary s, SummarizeEtcd(etcd, o.prefix));
  RC_ASSIGN_OR_RETURN(std::optional<datanode::DataRing> ring,
                      coordinator::LoadEtcdDataRing(etcd, o.prefix));
  RC_ASSIGN_OR_RETURN(std::optional<membership::CacheRingState> cache_ring,
                      membership::LoadEtcdCacheRing(etcd, o.prefix));

  std::map<uint32_t, std::string> data_addrs = NodesOf(s, membership::Role::kData);
  if (ring.has_value()) {
    for (const datanode::DataNodeEndpoint& e : ring->nodes) data_addrs.emplace(e.id, e.address);
  }
  std::map<uint32_t, std::string> cache_addrs = NodesOf(s, membership::Role::kCache);
  if (cache_ring.has_value()) {
    for (const auto& l : cache_ring->learned) cache_addrs.emplace(l.id, l.address);
  }
  std::vector<DataNodeView> data;
  std::vector<CacheNodeView> cache;
  for (const auto& [id, addr] : data_addrs) data.push_back(AskDataNode(id, addr, o.node_timeout));
  for (const auto& [id, addr] : cache_addrs) {
    cache.push_back(AskCacheNode(id, addr, o.node_timeout));
  }
  int64_t term = 0;
  const DataNodeView* newest = nullptr;
  int data_ok = 0, cache_ok = 0;
  for (const DataNodeView& d : data) {
    if (!d.answered) {
      *err << "ringcachectl: restore: data node " << d.id << " (" << d.address
           << ") did not answer: " << d.error << "\n";
      continue;
    }
    ++data_ok;
    term = std::max(term, static_cast<int64_t>(d.term));
    if (d.ring.has_value() && (newest == nullptr || d.ring->epoch > newest->ring->epoch)) {
      newest = &d;
    }
  }
  uint64_t max_epoch = 0;
  for (const CacheNodeView& c : cache) {
    if (!c.answered) {
      *err << "ringcachectl: restore: cache node " << c.id << " (" << c.address
           << ") did not answer: " << c.error << "\n";
      continue;
    }
    ++cache_ok;
    term = std::max(term, static_cast<int64_t>(c.term));
    max_epoch = std::max(max_epoch, c.epoch);
  }
  *out << "nodes: " << data_ok << " of " << data.size() << " data node(s) and " << cache_ok
       << " of " << cache.size() << " cache node(s) answered\n";
  if (data_ok == 0) {
    return absl::UnavailableError(
        "no data node answered: nothing to restore from (start them first)");
  }

  // The data ring.
  const uint64_t etcd_data_epoch = ring.has_value() ? ring->epoch : 0;
  if (newest != nullptr && newest->ring->epoch > etcd_data_epoch) {
    *out << "data ring: epoch " << etcd_data_epoch << " -> " << newest->ring->epoch
         << " (data node " << newest->id << "'s copy: changed after the backup)\n";
    if (!o.dry_run) {
      RC_RETURN_IF_ERROR(coordinator::SaveEtcdDataRing(etcd, o.prefix, *newest->ring));
    }
  } else {
    *out << "data ring: epoch " << etcd_data_epoch << ", as the data nodes have it\n";
  }

  // The cache ring's epoch.
  if (cache_ring.has_value() && max_epoch > cache_ring->epoch) {
    membership::CacheRingState raised = *cache_ring;
    raised.epoch = max_epoch + 1;
    *out << "cache ring: epoch " << cache_ring->epoch << " -> " << raised.epoch
         << " (the cache nodes saw " << max_epoch << ")\n";
    if (!o.dry_run) {
      RC_ASSIGN_OR_RETURN(membership::TxnResult r,
                          etcd->Txn({}, membership::CacheRingPuts(o.prefix, raised)));
      (void)r;
    }
  } else if (!cache_ring.has_value() && max_epoch > 0) {
    *err << "ringcachectl: restore: etcd holds no cache ring, the cache nodes saw epoch "
         << max_epoch << "; the coordinator publishes one when it is elected\n";
  } else {
    *out << "cache ring: epoch " << (cache_ring.has_value() ? cache_ring->epoch : 0)
         << ", not behind the cache nodes\n";
  }

  // The coordinator's next term.
  int64_t revision = 0;
  RC_ASSIGN_OR_RETURN(int64_t writes, RaiseRevision(etcd, o.prefix, term, o.dry_run, &revision));
  *out << "terms: the nodes saw coordinator term " << term << "; etcd revision " << revision
       << (revision > term ? " is past it" : " must pass it") << " (" << writes
       << " write(s))\n";

  RC_RETURN_IF_ERROR(RepairCatalog(etcd, o, s, data, out, err));
  if (!o.dry_run) {
    RC_RETURN_IF_ERROR(etcd->Delete(coordinator::RestoreMarkKey(o.prefix)).status());
    *out << "restore done: restart the data and cache nodes, then start the gateways\n";
  }
  return absl::OkStatus();
}

}  // namespace

}  // namespace ringcache::ctl
