// Replay of a lost cache node's write-back log to the home replicas.
#include "datanode/client/log_replay.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/status_macros.h"

namespace ringcache::datanode {

absl::StatusOr<ReplayStats> ReplayCacheNodeLog(
    DataNodePool* pool, uint32_t cache_node,
    const std::function<uint32_t(uint32_t vdi)>& replication, uint64_t seal_epoch) {
  if (seal_epoch > 0) RC_RETURN_IF_ERROR(pool->SealLog(cache_node, seal_epoch));
  ReplayStats stats;
  // Latest record per block, ordered by (vdi, object, block) so runs coalesce.
  using Key = std::tuple<uint32_t, uint64_t, uint32_t>;
  std::map<Key, v1::LogRecord> latest;
  uint64_t max_seq = 0;
  std::set<uint64_t> good, damaged;
  for (uint32_t id : pool->node_ids()) {
    std::vector<uint64_t> corrupt;
    RC_RETURN_IF_ERROR(pool->LogScan(id, cache_node, 0, true, [&](v1::LogRecord& r) {
      ++stats.records;
      max_seq = std::max(max_seq, r.sequence());
      // The data node verified the checksum on the way out; check again after the wire.
      if (BlockChecksum(r.data()) != r.checksum()) {
        damaged.insert(r.sequence());
        return;
      }
      good.insert(r.sequence());
      // The newest record by full version: ownership epoch first, then sequence (a node's
      // sequences only grow, across restarts and across incarnations of its store).
      v1::LogRecord& best = latest[Key{r.vdi_id(), r.object_index(), r.block_index()}];
      if (std::make_pair(r.epoch(), r.sequence()) > std::make_pair(best.epoch(), best.sequence())) {
        best = std::move(r);
      }
    }, &corrupt));
    for (uint64_t seq : corrupt) {
      damaged.insert(seq);
      max_seq = std::max(max_seq, seq);
    }
  }
  // A damaged copy is harmless while another copy of the same record is good. A record with no
  // good copy is lost: it is reported, and the replay goes on with the others.
  for (uint64_t seq : damaged) {
    if (good.contains(seq)) {
      ++stats.damaged_copies;
      continue;
    }
    ++stats.records_lost;
    spdlog::error("log replay of cache node {}: record {} has no good copy (every copy failed "
                  "its checksum); the write it carried is lost",
                  cache_node, seq);
  }
  stats.blocks = latest.size();
  // Write runs of consecutive blocks of one object home, conditionally, up to kReplayBatch runs
  // at a time (one request per data node each, DataNodePool::WriteAllBatch).
  constexpr size_t kReplayBatch = 16;
  std::vector<std::string> datas;
  std::vector<RunWrite> runs;
  std::vector<uint32_t> counts;  // blocks per run
  auto write_runs = [&]() -> absl::Status {
    if (runs.empty()) return absl::OkStatus();
    std::vector<uint32_t> stored;
    const std::vector<absl::Status> written = pool->WriteAllBatch(runs, &stored);
    absl::Status first;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!written[i].ok()) {
        if (first.ok()) first = written[i];
        continue;
      }
      stats.blocks_written += stored[i];
      stats.blocks_skipped += counts[i] - stored[i];
    }
    runs.clear();
    datas.clear();
    counts.clear();
    return first;
  };
  datas.reserve(kReplayBatch);  // the runs point into it: never reallocated while they do
  for (auto it = latest.begin(); it != latest.end();) {
    const auto [vdi, object, first] = it->first;
    const uint32_t n = replication(vdi);
    auto end = it;
    std::string data;
    HomeStamp stamp{cache_node, {}, true, {}};
    uint32_t next = first;
    while (end != latest.end() && std::get<0>(end->first) == vdi &&
           std::get<1>(end->first) == object && std::get<2>(end->first) == next) {
      data += end->second.data();
      stamp.seqs.push_back(end->second.sequence());
      stamp.epochs.push_back(end->second.epoch());
      ++next;
      ++end;
    }
    const uint32_t count = next - first;
    if (n == 0) {
      stats.blocks_orphaned += count;
    } else {
      datas.push_back(std::move(data));
      runs.push_back({vdi, object, first, &datas.back(), static_cast<int>(n), std::move(stamp)});
      counts.push_back(count);
      if (runs.size() == kReplayBatch) RC_RETURN_IF_ERROR(write_runs());
    }
    it = end;
  }
  RC_RETURN_IF_ERROR(write_runs());
  // Everything is home: drop the node's log. A data node that misses this keeps harmless
  // leftovers (they can never win over the stamped home copies).
  if (max_seq > 0) {
    std::vector<uint32_t> missed = pool->LogReclaim(cache_node, {}, max_seq + 1);
    if (!missed.empty()) {
      spdlog::warn("log replay of cache node {}: {} data node(s) kept its records (unreachable)",
                   cache_node, missed.size());
    }
  }
  spdlog::info("log replay of cache node {}: {} record copies, {} blocks, {} written home, {} "
               "already home, {} of deleted VDIs, {} damaged copies replaced by a good one, {} "
               "records lost",
               cache_node, stats.records, stats.blocks, stats.blocks_written,
               stats.blocks_skipped, stats.blocks_orphaned, stats.damaged_copies,
               stats.records_lost);
  return stats;
}

}  // namespace ringcache::datanode
