// The data rebalancer's copies (data_rebalancer.h): replicas scanned on their holders and
// written to their new homes in throttled runs, refills of a node back on an empty disk, heals of
// blocks missing a replica, and the purge of replicas on former homes.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "coordinator/data_rebalancer.h"

namespace ringcache::coordinator {

using datanode::DataNodeEndpoint;
using datanode::DataRing;

namespace {

// Consecutive blocks of one object bound for the same nodes, with one writer's stamps.
struct Run {
  uint32_t vdi = 0;
  uint64_t object = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t writer = 0;
  std::vector<uint64_t> seqs;
  std::vector<uint64_t> epochs;
  std::string data;
  std::vector<uint32_t> to;  // destination (copy) or holder (purge) nodes

  bool Extends(const v1::ScannedBlock& b, uint32_t writer_of_b,
               const std::vector<uint32_t>& dest) const {
    return count > 0 && b.vdi_id() == vdi && b.object_index() == object &&
           b.block_index() == first + count && writer_of_b == writer && dest == to;
  }
  // Starts the run at scanned block `b`, bound for `dest` (the run must be empty).
  void Start(const v1::ScannedBlock& b, const std::vector<uint32_t>& dest) {
    vdi = b.vdi_id();
    object = b.object_index();
    first = b.block_index();
    writer = b.writer();
    to = dest;
  }
  // Appends block `b` (with its data and version) to the run.
  void Add(const v1::ScannedBlock& b) {
    ++count;
    seqs.push_back(b.version());
    epochs.push_back(b.epoch());
    data += b.data();
  }
  // The copy keeps the source's versions.
  datanode::HomeStamp Stamp() const {
    datanode::HomeStamp stamp;
    stamp.writer = writer;
    if (writer != 0) {
      stamp.seqs = seqs;
      stamp.epochs = epochs;
    }
    return stamp;
  }
};

int Copies(int replication, size_t members) {
  return std::min<int>(std::max(replication, 1), static_cast<int>(members));
}

// The runs of one scan page: blocks join the open run while they extend it.
struct Runs {
  std::vector<Run> done;
  Run open;

  // Adds scanned block `b` (with its data when `with_data`) bound for `dest`.
  void Add(const v1::ScannedBlock& b, const std::vector<uint32_t>& dest, bool with_data) {
    const uint32_t writer = with_data ? b.writer() : 0;
    if (!open.Extends(b, writer, dest)) {
      Close();
      open.Start(b, dest);
      open.writer = writer;
    }
    if (with_data) {
      open.Add(b);
    } else {
      ++open.count;
    }
  }
  void Close() {
    if (open.count > 0) done.push_back(std::move(open));
    open = Run();
  }
};

// Copies each run of `runs` to its destinations, all at once (DataNodePool::CopyBlocksAll);
// adds the blocks stored to *stored and the bytes sent to *bytes.
absl::Status SendRuns(datanode::DataNodePool* pool, Runs* runs, uint64_t* stored, uint64_t* bytes) {
  runs->Close();
  std::vector<datanode::BlockCopy> copies;
  for (const Run& run : runs->done) {
    const datanode::HomeStamp stamp = run.Stamp();
    for (uint32_t to : run.to) {
      copies.push_back({to, run.vdi, run.object, run.first, &run.data, stamp});
      *bytes += run.data.size();
    }
  }
  RC_ASSIGN_OR_RETURN(uint64_t n, pool->CopyBlocksAll(copies));
  *stored += n;
  runs->done.clear();
  return absl::OkStatus();
}

}  // namespace

absl::flat_hash_map<uint32_t, int> DataRebalancer::Replications() const {
  absl::flat_hash_map<uint32_t, int> out;
  for (const VdiRecord& r : router_->catalog()->List()) {
    out[r.geometry.vdi_id()] = static_cast<int>(r.geometry.replication());
  }
  return out;
}

absl::Status DataRebalancer::ScanNode(
    uint32_t node, uint32_t page_size, bool with_data,
    const std::function<absl::Status(const std::vector<v1::ScannedBlock>&)>& on_page) {
  ring::ObjectKey from;
  uint32_t from_block = 0;
  for (;;) {
    if (Stopping()) return absl::CancelledError("stopping");
    RC_ASSIGN_OR_RETURN(datanode::BlockScanPage page,
                        pool_->ScanBlocks(node, from, from_block, page_size, with_data));
    RC_RETURN_IF_ERROR(on_page(page.blocks));
    if (page.done) return absl::OkStatus();
    from = page.next_object;
    from_block = page.next_block;
  }
}

absl::StatusOr<DataRebalancer::CopySources> DataRebalancer::FindCopySources(const DataRing& ring) {
  CopySources src;
  pool_->ProbeAll(2000);
  std::vector<uint32_t> down_list = pool_->DownFor(0);
  for (uint32_t id : ring.out) {
    if (std::find(down_list.begin(), down_list.end(), id) == down_list.end()) {
      down_list.push_back(id);  // out: holds nothing trusted, reachable or not
    }
  }
  src.down.insert(down_list.begin(), down_list.end());
  uint64_t estimate = 0;
  for (uint32_t id : ring.members) {
    if (src.down.contains(id)) continue;
    auto n = pool_->BlockCount(id);
    if (n.ok()) estimate += *n;
  }
  {
    absl::MutexLock l(&mu_);
    status_.set_blocks_estimated(estimate);
    status_.set_blocks_scanned(0);
    status_.set_message(src.down.empty()
                            ? ""
                            : absl::StrCat("copying from the other homes of data nodes ",
                                           absl::StrJoin(down_list, ","), " (down or out)"));
    copy_started_ = clock_->Now();
  }
  for (uint32_t id : ring.members) {
    if (src.down.contains(id)) continue;
    RC_ASSIGN_OR_RETURN(datanode::NodeVdis nv, pool_->VdisOn(id));
    src.incomplete[id] = std::move(nv.incomplete);
  }
  return src;
}

void DataRebalancer::NoteCopied(size_t scanned, uint64_t copied) {
  absl::MutexLock l(&mu_);
  status_.set_blocks_scanned(status_.blocks_scanned() + scanned);
  status_.set_blocks_copied(status_.blocks_copied() + copied);
  // The time left at the speed so far (the estimate is RocksDB's: a guide, not a promise).
  const double done = static_cast<double>(status_.blocks_scanned());
  const double total = static_cast<double>(status_.blocks_estimated());
  status_.set_eta_seconds(done > 0 && total > done
                              ? absl::ToDoubleSeconds(clock_->Now() - copy_started_) *
                                    (total - done) / done
                              : 0);
}

absl::Status DataRebalancer::Copy(const DataRing& ring) {
  RC_ASSIGN_OR_RETURN(ring::Ring old_ring, datanode::BuildDataRing(ring.Endpoints(ring.members)));
  RC_ASSIGN_OR_RETURN(ring::Ring new_ring, datanode::BuildDataRing(ring.Endpoints(ring.target)));
  const absl::flat_hash_map<uint32_t, int> replication = Replications();
  // A block is copied by the scan of its first reachable old home (all of them hold every
  // acknowledged write: home writes succeed only on all of them). A member incomplete for a VDI
  // (a new or wiped store, not refilled yet) is no source for it.
  RC_ASSIGN_OR_RETURN(CopySources sources, FindCopySources(ring));
  auto source_for = [&sources](uint32_t vdi, uint32_t id) {
    return !sources.down.contains(id) && !sources.incomplete[id].contains(vdi);
  };
  const absl::Time start = clock_->Now();
  uint64_t bytes = 0;
  for (uint32_t d : ring.members) {
    if (sources.down.contains(d)) continue;
    Runs runs;
    auto on_page = [&](const std::vector<v1::ScannedBlock>& blocks) -> absl::Status {
      if (options_.after_scan_for_test) options_.after_scan_for_test(blocks);
      for (const v1::ScannedBlock& b : blocks) {
        if (b.trimmed()) continue;  // nothing to copy: absent is absent
        auto rep = replication.find(b.vdi_id());
        if (rep == replication.end()) continue;  // VDI deleted meanwhile
        const ring::ObjectKey key{b.vdi_id(), b.object_index()};
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> old_homes,
                            old_ring.Owners(key, Copies(rep->second, ring.members.size())));
        auto src = std::find_if(old_homes.begin(), old_homes.end(),
                                [&](uint32_t id) { return source_for(b.vdi_id(), id); });
        if (src == old_homes.end()) {
          return absl::UnavailableError(absl::StrCat(
              "no complete replica of object ", b.object_index(), " of VDI ", b.vdi_id(),
              " answers (down, or a new store not refilled yet); the copy waits"));
        }
        if (*src != d) continue;
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> new_homes,
                            new_ring.Owners(key, Copies(rep->second, ring.target.size())));
        std::vector<uint32_t> dest;
        for (uint32_t h : new_homes) {
          if (std::find(old_homes.begin(), old_homes.end(), h) == old_homes.end()) {
            dest.push_back(h);
          }
        }
        if (dest.empty()) continue;
        runs.Add(b, dest, /*with_data=*/true);
      }
      uint64_t copied = 0;
      RC_RETURN_IF_ERROR(SendRuns(pool_, &runs, &copied, &bytes));
      Throttle(start, bytes);
      NoteCopied(blocks.size(), copied);
      return absl::OkStatus();
    };
    RC_RETURN_IF_ERROR(ScanNode(d, options_.scan_page, /*with_data=*/true, on_page));
  }
  return absl::OkStatus();
}

void DataRebalancer::Throttle(absl::Time start, uint64_t bytes) {
  if (start != paced_start_) {
    paced_start_ = start;
    paced_bytes_ = 0;
  }
  const absl::Duration wait = pacer_.After(bytes - paced_bytes_, clock_->Now());
  paced_bytes_ = bytes;
  absl::MutexLock l(&mu_);
  status_.set_limit_mb_s(pacer_.limit_bytes_per_s() / 1e6);
  status_.set_paced_for_clients(pacer_.busy() && options_.busy_mb_s > 0);
  if (wait <= absl::ZeroDuration()) return;
  auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
  mu_.AwaitWithTimeout(absl::Condition(&stop), wait);
}

absl::Status DataRebalancer::Heal() {
  const DataRing ring = pool_->ring();
  const std::vector<VdiRecord> catalog = router_->catalog()->List();
  absl::Status first_error;
  auto note = [&first_error](const absl::Status& st) {
    if (!st.ok() && first_error.ok()) first_error = st;
  };
  // What every answering member knows; a member that lacks a catalogued VDI (a new or wiped
  // store) learns it now, incomplete for it: it missed every earlier write.
  absl::flat_hash_map<uint32_t, datanode::NodeVdis> seen;
  for (uint32_t node : ring.members) {
    if (ring.IsOut(node)) continue;  // its replicas are made again by the move
    absl::StatusOr<datanode::NodeVdis> have = pool_->VdisOn(node);
    if (!have.ok()) continue;  // down: looked at again once it answers
    bool sealed = false;
    for (const VdiRecord& r : catalog) {
      const uint32_t id = r.geometry.vdi_id();
      if (have->known.contains(id)) continue;
      if (!sealed) {
        const absl::Status seals = CarrySeals(ring, node);
        note(seals);
        if (!seals.ok()) break;  // no VDI before the seals: tried again next pass
        sealed = true;
      }
      spdlog::warn(
          "data node {} does not know VDI {} ({}): a new or wiped store; registering "
          "the VDI there, incomplete until it is refilled",
          node, id, r.geometry.name());
      const absl::Status put = pool_->PutVdiOn(node, r.geometry, /*complete=*/false);
      note(put);
      if (!put.ok()) continue;
      have->known.insert(id);
      have->incomplete.insert(id);
    }
    seen[node] = *std::move(have);
  }
  // Refill a node's VDI only from members complete for it: every other member must answer and
  // be complete (a block's only other copy may sit on any of them), and the VDI must have
  // another home at all (N >= 2). Otherwise the node stays incomplete: its reads of blocks it
  // lacks fail rather than answer zeros.
  for (const auto& [node, nv] : seen) {
    absl::flat_hash_set<uint32_t> todo;
    for (const VdiRecord& r : catalog) {
      const uint32_t id = r.geometry.vdi_id();
      if (!nv.incomplete.contains(id) || r.geometry.replication() < 2) continue;
      bool sources = true;
      for (uint32_t m : ring.members) {
        if (m == node || ring.IsOut(m)) continue;
        auto it = seen.find(m);
        if (it == seen.end() || !it->second.known.contains(id) ||
            it->second.incomplete.contains(id)) {
          sources = false;
          break;
        }
      }
      if (sources) todo.insert(id);
    }
    if (!todo.empty()) note(Refill(ring, node, todo));
  }
  return first_error;
}

absl::Status DataRebalancer::Refill(const DataRing& ring, uint32_t node,
                                    const absl::flat_hash_set<uint32_t>& vdis) {
  RC_ASSIGN_OR_RETURN(ring::Ring homes_ring, datanode::BuildDataRing(ring.Endpoints(ring.members)));
  const absl::flat_hash_map<uint32_t, int> replication = Replications();
  pool_->ProbeAll(2000);
  for (uint32_t d : pool_->DownFor(0)) {
    if (d != node && !ring.IsOut(d) &&
        std::find(ring.members.begin(), ring.members.end(), d) != ring.members.end()) {
      return absl::UnavailableError(absl::StrCat("refilling data node ", node,
                                                 " needs every other data node; ", d, " is down"));
    }
  }
  SetState("refilling", absl::StrCat("data node ", node,
                                     " (a new or wiped store) is refilled "
                                     "from the other replicas"));
  spdlog::warn("data node {}: refilling VDIs {} from the other replicas", node,
               absl::StrJoin(vdis, ","));
  const absl::Time start = clock_->Now();
  uint64_t copied = 0, bytes = 0;
  for (uint32_t d : ring.members) {
    if (d == node || ring.IsOut(d)) continue;
    Runs runs;
    auto on_page = [&](const std::vector<v1::ScannedBlock>& blocks) -> absl::Status {
      for (const v1::ScannedBlock& b : blocks) {
        if (b.trimmed() || !vdis.contains(b.vdi_id())) continue;
        auto rep = replication.find(b.vdi_id());
        if (rep == replication.end()) continue;  // VDI deleted meanwhile
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes,
                            homes_ring.Owners(ring::ObjectKey{b.vdi_id(), b.object_index()},
                                              Copies(rep->second, ring.members.size())));
        if (std::find(homes.begin(), homes.end(), node) == homes.end()) continue;
        runs.Add(b, {node}, /*with_data=*/true);
      }
      RC_RETURN_IF_ERROR(SendRuns(pool_, &runs, &copied, &bytes));
      Throttle(start, bytes);
      absl::MutexLock l(&mu_);
      status_.set_message(absl::StrCat("refilling data node ", node, ": ", copied,
                                       " blocks copied from the other replicas"));
      return absl::OkStatus();
    };
    RC_RETURN_IF_ERROR(ScanNode(d, options_.scan_page, /*with_data=*/true, on_page));
  }
  // Every block the other members held when their scans passed it is on the node now, and
  // everything written since reached it directly (home writes go to every home): complete.
  for (const VdiRecord& r : router_->catalog()->List()) {
    if (!vdis.contains(r.geometry.vdi_id())) continue;
    RC_RETURN_IF_ERROR(pool_->PutVdiOn(node, r.geometry, /*complete=*/true));
  }
  spdlog::warn("data node {}: refilled, {} blocks copied in {}; complete again", node, copied,
               absl::FormatDuration(clock_->Now() - start));
  SetState("idle", absl::StrCat("data node ", node, " refilled: ", copied, " blocks"));
  return absl::OkStatus();
}

absl::Status DataRebalancer::Purge(const DataRing& ring) {
  RC_ASSIGN_OR_RETURN(ring::Ring homes_ring, datanode::BuildDataRing(ring.Endpoints(ring.members)));
  const absl::flat_hash_map<uint32_t, int> replication = Replications();
  for (uint32_t d : ring.members) {
    Runs runs;
    auto on_page = [&](const std::vector<v1::ScannedBlock>& blocks) -> absl::Status {
      for (const v1::ScannedBlock& b : blocks) {
        auto rep = replication.find(b.vdi_id());
        if (rep == replication.end()) continue;
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes,
                            homes_ring.Owners(ring::ObjectKey{b.vdi_id(), b.object_index()},
                                              Copies(rep->second, ring.members.size())));
        if (std::find(homes.begin(), homes.end(), d) != homes.end()) continue;
        runs.Add(b, {}, /*with_data=*/false);
      }
      runs.Close();
      std::vector<datanode::BlockSpan> spans;
      uint64_t count = 0;
      for (const Run& run : runs.done) {
        spans.push_back({run.vdi, run.object, run.first, run.count});
        count += run.count;
      }
      runs.done.clear();
      RC_RETURN_IF_ERROR(pool_->PurgeBlocksAll(d, spans));
      absl::MutexLock l(&mu_);
      status_.set_blocks_deleted(status_.blocks_deleted() + count);
      return absl::OkStatus();
    };
    RC_RETURN_IF_ERROR(ScanNode(d, 4096, /*with_data=*/false, on_page));
  }
  return absl::OkStatus();
}

}  // namespace ringcache::coordinator
