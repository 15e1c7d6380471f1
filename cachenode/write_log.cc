// The cache node's write-back log: sequences, appends, background reclaim and collection.
#include "cachenode/write_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {
namespace {

// Sequences handed out per durable move of the high-water mark.
constexpr uint64_t kMarkStep = 1 << 20;

}  // namespace

WriteLog::WriteLog(const WriteLogConfig& config, datanode::DataNodePool* pool, LiveFn live)
    : config_(config), pool_(pool), live_(std::move(live)) {}

absl::StatusOr<std::unique_ptr<WriteLog>> WriteLog::Open(const WriteLogConfig& config,
                                                         datanode::DataNodePool* pool,
                                                         metrics::Registry* registry,
                                                         LiveFn live) {
  if (config.node_id == 0) return absl::InvalidArgumentError("write log needs a node id");
  if (config.seq_path.empty()) return absl::InvalidArgumentError("write log needs seq_path");
  std::unique_ptr<WriteLog> log(new WriteLog(config, pool, std::move(live)));
  RC_RETURN_IF_ERROR(log->LoadMark());
  const metrics::Labels node{{"node", absl::StrCat(config.node_id)}};
  log->appended_ = registry->GetCounter("ringcache_cachenode_log_records_appended_total",
                                        "Write-back log records appended (per copy).", node);
  log->overlapping_ = registry->GetCounter(
      "ringcache_cachenode_log_overlap_records_total",
      "Log record copies placed on one of the block's own home replicas because the data ring "
      "has fewer than 2N-1 reachable nodes.",
      node);
  log->append_failures_ = registry->GetCounter(
      "ringcache_cachenode_log_append_failures_total",
      "Writes refused because fewer than N-1 data nodes took their log records.", node);
  log->reclaimed_ = registry->GetCounter("ringcache_cachenode_log_records_retired_total",
                                         "Log records retired (superseded or destaged).", node);
  log->collected_records_ = registry->GetCounter(
      "ringcache_cachenode_log_records_collected_total",
      "Leftover log records dropped by the collector (after a crash or a missed reclaim).", node);
  registry->AddCallbackGauge("ringcache_cachenode_log_pending_reclaims",
                             "Retired log records not yet dropped on the data nodes.", node,
                             [p = log.get()] { return static_cast<double>(p->pending_reclaims()); });
  registry->AddCallbackGauge("ringcache_cachenode_log_over_limit",
                             "1 while a data node's log area is over its limit (pushback).", node,
                             [p = log.get()] { return p->over_limit() ? 1.0 : 0.0; });
  {
    absl::MutexLock l(&log->mu_);
    for (uint32_t id : pool->node_ids()) log->collect_.insert(id);
  }
  log->thread_ = std::thread([p = log.get()] { p->Loop(); });
  return log;
}

WriteLog::~WriteLog() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  ReclaimNow().IgnoreError();
}

absl::Status WriteLog::LoadMark() {
  absl::MutexLock l(&seq_mu_);
  uint64_t mark = 1;
  absl::StatusOr<std::string> file = ReadStateFile(config_.seq_path, 64);
  if (file.ok()) {
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*file), &mark) || mark == 0) {
      return absl::DataLossError(absl::StrCat(
          config_.seq_path, " does not hold a log sequence mark; if the SSD file was wiped too, "
                            "remove it (sequences must never repeat while log records exist)"));
    }
  } else if (!absl::IsNotFound(file.status())) {
    return file.status();  // a link in its place, or unreadable
  }
  // Everything below the stored mark may have been used before the restart.
  mark = std::max(mark, config_.min_seq);
  next_ = mark;
  return StoreMark(mark + kMarkStep);
}

absl::Status WriteLog::StoreMark(uint64_t mark) {
  RC_RETURN_IF_ERROR(WriteFileAtomically(config_.seq_path, absl::StrCat(mark, "\n")));
  mark_ = mark;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> WriteLog::Reserve(uint32_t n) {
  absl::MutexLock l(&seq_mu_);
  if (next_ + n > mark_) RC_RETURN_IF_ERROR(StoreMark(next_ + n + kMarkStep));
  const uint64_t first = next_;
  next_ += n;
  inflight_.insert(first);
  return first;
}

void WriteLog::Done(uint64_t first) {
  absl::MutexLock l(&seq_mu_);
  auto it = inflight_.find(first);
  if (it != inflight_.end()) inflight_.erase(it);
}

absl::Status WriteLog::Append(uint32_t vdi, uint64_t object, uint32_t first_block,
                              uint32_t block_size, const char* data, uint32_t count,
                              int replication, uint64_t first_seq, uint64_t epoch,
                              const std::function<void()>& overlap,
                              std::vector<uint32_t>* landed) {
  const int copies = replication - 1;
  if (copies <= 0) {
    if (overlap) overlap();
    return absl::OkStatus();
  }
  // Built straight into the request: the block data is copied once, not per copy.
  v1::LogAppendRequest req;
  for (uint32_t i = 0; i < count; ++i) {
    v1::LogRecord& r = *req.add_records();
    r.set_cache_node_id(config_.node_id);
    r.set_sequence(first_seq + i);
    r.set_vdi_id(vdi);
    r.set_object_index(object);
    r.set_block_index(first_block + i);
    r.set_data(data + uint64_t{i} * block_size, block_size);
    r.set_checksum(BlockChecksum(r.data()));
    r.set_epoch(epoch);
  }
  auto res = pool_->LogAppend(vdi, object, replication, copies, req, overlap);
  if (!res.ok()) {
    append_failures_->Increment();
    return res.status();
  }
  appended_->Increment(static_cast<double>(count) * res->nodes.size());
  if (res->overlapping > 0) {
    overlapping_->Increment(static_cast<double>(count) * res->overlapping);
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      spdlog::warn("cache node {}: the data ring is too small (or nodes are down) to keep log "
                   "copies apart from home replicas for N={}; some log copies share a node with "
                   "a home replica (counted in ringcache_cachenode_log_overlap_records_total)",
                   config_.node_id, replication);
    }
  }
  over_limit_ = res->over_limit;
  if (landed != nullptr) *landed = res->nodes;
  return absl::OkStatus();
}

void WriteLog::Retire(const std::vector<uint64_t>& seqs) {
  if (seqs.empty()) return;
  reclaimed_->Increment(static_cast<double>(seqs.size()));
  absl::MutexLock l(&mu_);
  retired_.insert(retired_.end(), seqs.begin(), seqs.end());
}

uint64_t WriteLog::pending_reclaims() const {
  absl::MutexLock l(&mu_);
  return retired_.size();
}

absl::StatusOr<v1::LogRecord> WriteLog::Fetch(uint64_t seq) {
  return pool_->FetchLogRecord(config_.node_id, seq);
}

absl::Status WriteLog::ReclaimNow() {
  std::vector<uint64_t> batch;
  {
    absl::MutexLock l(&mu_);
    batch.swap(retired_);
  }
  if (batch.empty()) return absl::OkStatus();
  std::vector<uint32_t> failed = pool_->LogReclaim(config_.node_id, batch);
  if (failed.empty()) return absl::OkStatus();
  absl::MutexLock l(&mu_);
  for (uint32_t id : failed) collect_.insert(id);  // its copies are dropped by the collector
  return absl::UnavailableError(
      absl::StrCat(failed.size(), " data node(s) missed a log reclaim; collected later"));
}

absl::StatusOr<uint64_t> WriteLog::Collect(uint32_t id) {
  // Bound: below every sequence still in flight, so a record whose block entry is not updated
  // yet is never taken for garbage.
  uint64_t bound;
  {
    absl::MutexLock l(&seq_mu_);
    bound = inflight_.empty() ? next_ : *inflight_.begin();
  }
  const absl::flat_hash_set<uint64_t> live = live_();
  std::vector<uint64_t> dead, damaged;
  RC_RETURN_IF_ERROR(pool_->LogScan(
      id, config_.node_id, 0, false,
      [&](v1::LogRecord& r) {
        if (r.sequence() < bound && !live.contains(r.sequence())) dead.push_back(r.sequence());
      },
      &damaged));
  // A damaged copy (a scrub's finding) that no block needs is garbage like any other: left
  // behind, it would stay open in the scrub's findings for good.
  for (uint64_t seq : damaged) {
    if (seq < bound && !live.contains(seq)) dead.push_back(seq);
  }
  for (size_t i = 0; i < dead.size(); i += 4096) {
    std::vector<uint64_t> part(dead.begin() + i,
                               dead.begin() + std::min(dead.size(), i + 4096));
    pool_->LogReclaim(config_.node_id, part);  // a node that misses it is collected again
  }
  collected_records_->Increment(static_cast<double>(dead.size()));
  return dead.size();
}

void WriteLog::Loop() {
  uint64_t rounds = 0;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop),
                           absl::Milliseconds(config_.reclaim_interval_ms));
      if (stop_) return;
    }
    ReclaimNow().IgnoreError();
    if (++rounds % 5 == 0) pool_->ProbeAll(500);  // keeps the pool's up/down view current
    std::vector<uint32_t> todo;
    {
      absl::MutexLock l(&mu_);
      todo.assign(collect_.begin(), collect_.end());
    }
    for (uint32_t id : todo) {
      auto n = Collect(id);
      if (!n.ok()) continue;  // unreachable: try again next round
      if (*n > 0) {
        spdlog::info("cache node {}: dropped {} leftover log records on data node {}",
                     config_.node_id, *n, id);
      }
      absl::MutexLock l(&mu_);
      collect_.erase(id);
    }
    if (!collected_.load()) {
      absl::MutexLock l(&mu_);
      if (collect_.empty()) collected_ = true;
    }
  }
}

}  // namespace ringcache::cachenode
