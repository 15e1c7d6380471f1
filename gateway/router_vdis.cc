// The router's VDI administration: every VDI registered on every data node and cache node,
// create, delete, resize, cache mode and policy, flush and statistics across the cache ring.
#include "gateway/router.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "common/policy_spec.h"
#include "common/status_macros.h"
#include "gateway/piece_pool.h"


namespace ringcache::gateway {

absl::Status Router::RegisterAll() {
  for (const auto& r : catalog_->List()) {
    // Not vouched: a data node that learns of the VDI only now (a new or wiped store) missed
    // its writes and stays incomplete for it.
    if (data_nodes_ != nullptr) RC_RETURN_IF_ERROR(data_nodes_->PutVdi(r.geometry));
    // A node being removed is skipped: it is leaving (dead, as a rule: a call would wait for it
    // until its deadline), and a node that comes back is given every VDI when it joins.
    for (CacheMember* m : Live(/*skip_removing=*/true)) {
      RC_RETURN_IF_ERROR(m->client->RegisterVdi(r.geometry, r.mode, r.policy));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<VdiRecord> Router::CreateVdi(const std::string& name, uint64_t size,
                                            uint32_t object_size, uint32_t replication) {
  if (replication > data_nodes_->size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replication ", replication, " needs at least that many data nodes; the cluster has ",
        data_nodes_->size()));
  }
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Create(name, size, object_size, replication));
  // A new VDI: nothing is written yet, so every data node holds all of it (complete).
  absl::Status s = data_nodes_->PutVdi(r.geometry, datanode::DataNodePool::AllComplete);
  for (CacheMember* m : Live()) {
    if (s.ok()) s = m->client->RegisterVdi(r.geometry, r.mode, r.policy);
  }
  if (!s.ok()) {
    catalog_->Delete(name).IgnoreError();
    return s;
  }
  return r;
}

absl::Status Router::DeleteVdi(const std::string& name) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  for (CacheMember* m : Live()) RC_RETURN_IF_ERROR(m->client->DropVdi(r.geometry.vdi_id()));
  RC_RETURN_IF_ERROR(data_nodes_->DeleteVdi(r.geometry.vdi_id()));
  return catalog_->Delete(name);
}

absl::StatusOr<VdiRecord> Router::ResizeVdi(const std::string& name, uint64_t size) {
  RC_ASSIGN_OR_RETURN(VdiRecord old, catalog_->Find(name));
  if (size < old.geometry.size_bytes()) {
    // Drop cached blocks beyond the new end by re-registering after the shrink; data nodes refuse
    // objects beyond the size from now on.
    for (CacheMember* m : Live()) {
      RC_RETURN_IF_ERROR(m->client->Flush(old.geometry.vdi_id()).status());
    }
  }
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Resize(name, size));
  RC_RETURN_IF_ERROR(data_nodes_->PutVdi(r.geometry));
  for (CacheMember* m : Live()) RC_RETURN_IF_ERROR(m->client->RegisterVdi(r.geometry, r.mode, r.policy));
  return r;
}

absl::Status Router::SetMode(const std::string& name, v1::CacheMode mode) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  for (CacheMember* m : Live()) RC_RETURN_IF_ERROR(m->client->SetMode(r.geometry.vdi_id(), mode));
  return catalog_->SetMode(name, mode);
}

absl::Status Router::SetPolicy(const std::string& name, const std::string& policy_in) {
  // The cache nodes check the spec itself.
  const std::string policy = CanonicalPolicySpec(policy_in);
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  // Every live node switches, or none: a node that refuses (a bad spec, a node policy without
  // per-VDI queues) puts the ones already switched back.
  std::vector<CacheMember*> done;
  for (CacheMember* m : Live()) {
    absl::Status s = m->client->SetPolicy(r.geometry.vdi_id(), policy);
    if (!s.ok()) {
      for (CacheMember* d : done) (void)d->client->SetPolicy(r.geometry.vdi_id(), r.policy);
      return s;
    }
    done.push_back(m);
  }
  return catalog_->SetPolicy(name, policy);
}

absl::Status Router::SetShares(const std::string& name, uint32_t min_permille,
                              uint32_t max_permille) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  v1::VdiGeometry g = r.geometry;
  g.set_ssd_min_permille(min_permille);
  g.set_ssd_max_permille(max_permille);
  std::vector<CacheMember*> done;
  for (CacheMember* m : Live(/*skip_removing=*/true)) {
    absl::Status s = m->client->RegisterVdi(g, r.mode, r.policy);
    if (!s.ok()) {
      for (CacheMember* d : done) (void)d->client->RegisterVdi(r.geometry, r.mode, r.policy);
      return s;
    }
    done.push_back(m);
  }
  return absl::OkStatus();
}

absl::Status Router::Flush(const std::string& name,
                           const std::function<void(size_t, uint64_t)>& progress) {
  uint32_t vdi = 0;
  if (!name.empty()) {
    RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
    vdi = r.geometry.vdi_id();
  }
  uint64_t left = 0;
  const std::vector<CacheMember*> live = Live();
  for (size_t i = 0; i < live.size(); ++i) {
    RC_ASSIGN_OR_RETURN(uint64_t l, live[i]->client->Flush(vdi));
    left += l;
    if (progress) progress(i + 1, left);
  }
  return absl::OkStatus();
}

absl::StatusOr<Router::Invalidated> Router::InvalidateVdi(const std::string& name, bool flush) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  const uint32_t vdi = r.geometry.vdi_id();
  const std::vector<CacheMember*> live = Live();
  auto on = [](const CacheMember* m, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("cache node ", m->id, ": ", s.message()));
  };
  uint64_t dirty = 0;
  for (CacheMember* m : live) {
    if (flush) {
      if (absl::Status s = m->client->Flush(vdi).status(); !s.ok()) return on(m, s);
      continue;
    }
    std::vector<v1::VdiCacheStats> stats;
    if (absl::Status s = m->client->Stats(vdi, &stats); !s.ok()) return on(m, s);
    for (const auto& x : stats) dirty += x.dirty_bytes();
  }
  if (dirty > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "VDI ", name, " has ", dirty, " dirty bytes in the cache nodes, the only copy of that "
        "data: destage them first (`ringcachectl flush --vdi ", name,
        "`) or invalidate with --flush"));
  }
  Invalidated out;
  for (CacheMember* m : live) {
    absl::StatusOr<CacheClient::Invalidated> i = m->client->InvalidateVdi(vdi);
    if (!i.ok()) return on(m, i.status());
    out.dropped += i->dropped;
    out.dirty_kept += i->dirty_kept;
    ++out.nodes;
  }
  return out;
}

absl::Status Router::Stats(const std::string& name, std::vector<v1::VdiCacheStats>* out,
                           const std::vector<uint32_t>& skip) {
  uint32_t vdi = 0;
  if (!name.empty()) {
    RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
    vdi = r.geometry.vdi_id();
  }
  std::map<uint32_t, v1::VdiCacheStats> sum;
  std::map<uint32_t, int> n;
  std::map<uint32_t, int> queues;  // nodes that have a queue for the VDI (and so bounds)
  // The VDI's admission state: the mean over the nodes that report it.
  struct Mean {
    bool (v1::VdiCacheStats::*has)() const;
    double (v1::VdiCacheStats::*get)() const;
    void (v1::VdiCacheStats::*set)(double);
    std::map<uint32_t, int> nodes;  // per VDI, the nodes that report it
  };
  Mean means[] = {
      {&v1::VdiCacheStats::has_admit_first, &v1::VdiCacheStats::admit_first,
       &v1::VdiCacheStats::set_admit_first, {}},
      {&v1::VdiCacheStats::has_admit_bar, &v1::VdiCacheStats::admit_bar,
       &v1::VdiCacheStats::set_admit_bar, {}},
      {&v1::VdiCacheStats::has_admit_region_margin, &v1::VdiCacheStats::admit_region_margin,
       &v1::VdiCacheStats::set_admit_region_margin, {}},
      {&v1::VdiCacheStats::has_admit_budget_margin, &v1::VdiCacheStats::admit_budget_margin,
       &v1::VdiCacheStats::set_admit_budget_margin, {}},
  };
  for (CacheMember* m : Live()) {
    if (std::find(skip.begin(), skip.end(), m->id) != skip.end()) continue;
    std::vector<v1::VdiCacheStats> s;
    RC_RETURN_IF_ERROR(m->client->Stats(vdi, &s));
    for (const auto& x : s) {
      v1::VdiCacheStats& t = sum[x.vdi_id()];
      t.set_vdi_id(x.vdi_id());
      t.set_hits_ram(t.hits_ram() + x.hits_ram());
      t.set_hits_ssd(t.hits_ssd() + x.hits_ssd());
      t.set_misses(t.misses() + x.misses());
      t.set_bypassed(t.bypassed() + x.bypassed());
      t.set_ssd_writes(t.ssd_writes() + x.ssd_writes());
      t.set_reads(t.reads() + x.reads());
      t.set_writes(t.writes() + x.writes());
      t.set_queue_length(t.queue_length() + x.queue_length());
      t.set_max_length(t.max_length() + x.max_length());
      t.set_upper_bound(t.upper_bound() + x.upper_bound());
      t.set_lower_bound(t.lower_bound() + x.lower_bound());
      t.set_dirty_bytes(t.dirty_bytes() + x.dirty_bytes());
      t.set_oldest_dirty_ms(std::max(t.oldest_dirty_ms(), x.oldest_dirty_ms()));
      for (Mean& m : means) {
        if (!(x.*m.has)()) continue;
        (t.*m.set)((t.*m.get)() + (x.*m.get)());
        ++m.nodes[x.vdi_id()];
      }
      t.set_mode(x.mode());
      // Nodes agree unless one could not run the VDI's own policy (it keeps the node's).
      if (n[x.vdi_id()] == 0) {
        t.set_policy(x.policy());
      } else if (t.policy() != x.policy()) {
        t.set_policy(absl::StrCat(t.policy(), " | ", x.policy()));
      }
      ++n[x.vdi_id()];
      if (x.upper_bound() > 0) ++queues[x.vdi_id()];
    }
  }
  for (auto& [id, t] : sum) {
    // U_i, D_i are fractions: average them over the nodes that hold a queue for the VDI (a
    // node the VDI's objects have not reached yet has none, and reports 0).
    const int q = std::max(1, queues[id]);
    for (Mean& m : means) {
      if ((t.*m.has)()) (t.*m.set)((t.*m.get)() / m.nodes[id]);
    }
    t.set_upper_bound(t.upper_bound() / q);
    t.set_lower_bound(t.lower_bound() / q);
    out->push_back(t);
  }
  return absl::OkStatus();
}


}  // namespace ringcache::gateway
