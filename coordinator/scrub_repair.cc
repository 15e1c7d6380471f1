// The coordinator's scrub repairs: see scrub_repair.h.
#include "coordinator/scrub_repair.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace ringcache::coordinator {

void ScrubRepair::Tally::Note(const absl::Status& s) {
  if (!s.ok() && problem.empty()) problem = std::string(s.message());
}

void ScrubRepair::RepairBlock(uint32_t node, const v1::ScrubFinding& f, const VdiRecord& vdi,
                              Tally* tally) {
  const v1::VdiGeometry& g = vdi.geometry;
  absl::StatusOr<bool> fixed =
      pool_->RepairBlockOn(node, f.vdi_id(), f.object_index(), f.block_index(),
                           static_cast<int>(g.replication()), g.block_size());
  if (!fixed.ok()) {
    tally->Note(fixed.status());
  } else if (*fixed) {
    ++tally->repaired;
    spdlog::warn(
        "scrub: block {} of object {} of VDI {} on data node {} was damaged: rewritten from a "
        "good replica",
        f.block_index(), f.object_index(), g.name(), node);
  } else {
    ++tally->unrepairable;
    tally->damaged.insert(g.name());
    spdlog::error(
        "scrub: block {} of object {} of VDI {} on data node {} is damaged and no other "
        "replica holds a good copy: it reads as an I/O error",
        f.block_index(), f.object_index(), g.name(), node);
  }
}

void ScrubRepair::RelogRecords(uint32_t node, uint32_t cache_node,
                               const std::vector<uint64_t>& seqs, gateway::CacheClient* client,
                               Tally* tally) {
  absl::StatusOr<uint32_t> n = client->RelogRecords(seqs);
  if (!n.ok()) {
    tally->Note(n.status());
    return;
  }
  // What the node did not log again is no longer dirty under those records: obsolete. A data
  // node that missed the reclaim keeps them listed: they are handed again next poll.
  if (*n < seqs.size() && !pool_->LogReclaim(cache_node, seqs).empty()) return;
  tally->relogged += seqs.size();
  const absl::Time now = clock_->Now();
  for (uint64_t seq : seqs) handled_[{cache_node, seq}] = now;
  spdlog::warn(
      "scrub: {} log records of cache node {} damaged on data node {}: {} blocks logged again, "
      "the rest obsolete",
      seqs.size(), cache_node, node, *n);
}

v1::ClusterScrubStatus ScrubRepair::Poll(bool start) {
  absl::MutexLock poll(&poll_mu_);
  v1::ClusterScrubStatus out;
  absl::flat_hash_map<uint32_t, VdiRecord> vdis;
  for (VdiRecord& r : router_->catalog()->List()) vdis[r.geometry.vdi_id()] = std::move(r);
  absl::flat_hash_map<uint32_t, gateway::CacheClient*> caches;
  for (const auto& [id, client] : router_->ServingOrJoining()) caches[id] = client;
  Tally tally;
  absl::flat_hash_set<std::pair<uint32_t, uint64_t>> listed;
  for (uint32_t node : pool_->node_ids()) {
    absl::StatusOr<v1::DataNodeScrubReport> report = pool_->Scrub(node, start);
    if (!report.ok()) {
      out.add_unreachable(node);
      continue;
    }
    // Damaged log record copies, by cache node.
    absl::flat_hash_map<uint32_t, std::vector<uint64_t>> records;
    for (const v1::ScrubFinding& f : report->open()) {
      if (f.log()) {
        const std::pair<uint32_t, uint64_t> key{f.cache_node_id(), f.sequence()};
        listed.insert(key);
        auto handed = handled_.find(key);
        if (handed == handled_.end() || clock_->Now() - handed->second > kRehandAfter) {
          records[f.cache_node_id()].push_back(f.sequence());
        }
        continue;
      }
      auto vdi = vdis.find(f.vdi_id());
      if (vdi == vdis.end()) continue;  // a deleted VDI's copy: removed with it
      RepairBlock(node, f, vdi->second, &tally);
    }
    for (const auto& [cache_node, seqs] : records) {
      auto client = caches.find(cache_node);
      if (client == caches.end()) continue;  // not serving: replay takes another copy
      RelogRecords(node, cache_node, seqs, client->second, &tally);
    }
    *out.add_nodes() = *std::move(report);
  }
  // Retired everywhere by now: forget them (a listed one that is damaged again is new).
  absl::erase_if(handled_, [&listed](const auto& entry) { return !listed.contains(entry.first); });
  absl::MutexLock l(&mu_);
  blocks_repaired_ += tally.repaired;
  log_records_relogged_ += tally.relogged;
  out.set_blocks_repaired(blocks_repaired_);
  out.set_log_records_relogged(log_records_relogged_);
  out.set_unrepairable_blocks(tally.unrepairable);
  for (const std::string& name : tally.damaged) out.add_damaged_vdis(name);
  out.set_message(tally.problem);
  last_ = out;
  return out;
}

v1::ClusterScrubStatus ScrubRepair::Last() const {
  absl::MutexLock l(&mu_);
  return last_;
}

}  // namespace ringcache::coordinator
