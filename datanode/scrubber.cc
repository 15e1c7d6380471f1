// The data node's background scrub: see scrubber.h.
#include "datanode/scrubber.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace ringcache::datanode {
namespace {

constexpr uint64_t kStepBytes = 1 << 20;  // read per step, between throttle checks

v1::ScrubFinding ToProto(const ScrubFinding& f) {
  v1::ScrubFinding p;
  p.set_log(f.log);
  if (f.log) {
    p.set_cache_node_id(f.cache_node_id);
    p.set_sequence(f.sequence);
  } else {
    p.set_vdi_id(f.vdi_id);
    p.set_object_index(f.object_index);
    p.set_block_index(f.block_index);
  }
  return p;
}

}  // namespace

Scrubber::Scrubber(uint32_t node_id, BlockStore* store, Options options,
                   metrics::Registry* registry)
    : node_id_(node_id), store_(store), options_(options) {
  report_.set_node_id(node_id);
  if (registry != nullptr) {
    bytes_ = registry->GetCounter("ringcache_datanode_scrub_bytes_total",
                                  "Bytes of blocks and log records the scrub has checked.");
    damaged_blocks_ = registry->GetCounter(
        "ringcache_datanode_scrub_damaged_blocks_total",
        "Stored block copies the scrub found failing their checksum (repaired by the "
        "coordinator from a good replica).");
    damaged_log_ = registry->GetCounter(
        "ringcache_datanode_scrub_damaged_log_records_total",
        "Log record copies the scrub found failing their checksum (logged again by their "
        "cache node).");
    passes_metric_ = registry->GetCounter("ringcache_datanode_scrub_passes_total",
                                          "Completed scrub passes.");
    registry->AddCallbackGauge(
        "ringcache_datanode_scrub_open_findings",
        "Damaged copies the scrub found that are not repaired yet.", {}, [this] {
          absl::MutexLock l(&mu_);
          return static_cast<double>(open_.size());
        });
  }
  thread_ = std::thread([this] { Loop(); });
}

Scrubber::~Scrubber() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Scrubber::Start() {
  absl::MutexLock l(&mu_);
  start_ = true;
}

void Scrubber::Loop() {
  absl::Time next = options_.interval > absl::ZeroDuration() ? absl::Now() + options_.interval
                                                             : absl::InfiniteFuture();
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || start_; };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next);
      if (stop_) return;
      start_ = false;
      running_ = true;
      report_.set_running(true);
      report_.set_bytes_this_pass(0);
    }
    Pass();
    absl::MutexLock l(&mu_);
    running_ = false;
    report_.set_running(false);
    if (stop_) return;
    if (options_.interval > absl::ZeroDuration()) next = absl::Now() + options_.interval;
  }
}

void Scrubber::Pass() {
  ScrubCursor cursor;
  const absl::Time start = absl::Now();
  uint64_t bytes = 0;
  uint64_t blocks_before = 0, log_before = 0;
  spdlog::info("data node {}: scrub pass starts", node_id_);
  while (!cursor.done) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
    }
    std::vector<ScrubFinding> bad;
    absl::StatusOr<uint64_t> read = store_->Scrub(&cursor, kStepBytes, &bad);
    if (!read.ok()) {
      spdlog::error("data node {}: scrub stopped: {}", node_id_, read.status().ToString());
      absl::MutexLock l(&mu_);
      report_.set_error(std::string(read.status().message()));
      return;
    }
    bytes += *read;
    if (bytes_ != nullptr) bytes_->Increment(static_cast<double>(*read));
    for (const ScrubFinding& f : bad) {
      if (f.log) {
        spdlog::error("data node {}: scrub: log record {} of cache node {} fails its checksum",
                      node_id_, f.sequence, f.cache_node_id);
        if (damaged_log_ != nullptr) damaged_log_->Increment();
      } else {
        spdlog::error("data node {}: scrub: block {} of object {} of VDI {} fails its checksum",
                      node_id_, f.block_index, f.object_index, f.vdi_id);
        if (damaged_blocks_ != nullptr) damaged_blocks_->Increment();
      }
    }
    {
      absl::MutexLock l(&mu_);
      report_.set_bytes_this_pass(bytes);
      report_.set_blocks_checked(report_.blocks_checked() + cursor.blocks_checked - blocks_before);
      report_.set_log_records_checked(report_.log_records_checked() + cursor.log_records_checked -
                                      log_before);
      for (const ScrubFinding& f : bad) {
        if (f.log) {
          report_.set_damaged_log_records_found(report_.damaged_log_records_found() + 1);
        } else {
          report_.set_damaged_blocks_found(report_.damaged_blocks_found() + 1);
        }
        if (std::find(open_.begin(), open_.end(), f) == open_.end()) open_.push_back(f);
      }
      if (open_.size() > options_.max_open) {
        open_.erase(open_.begin(), open_.begin() + (open_.size() - options_.max_open));
      }
    }
    blocks_before = cursor.blocks_checked;
    log_before = cursor.log_records_checked;
    // Throttle: hold the pass at mb_s on average.
    const absl::Duration due = absl::Seconds(static_cast<double>(bytes) / (options_.mb_s * 1e6));
    const absl::Duration ahead = due - (absl::Now() - start);
    if (ahead > absl::ZeroDuration()) {
      absl::MutexLock l(&mu_);
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), ahead);
    }
  }
  if (passes_metric_ != nullptr) passes_metric_->Increment();
  absl::MutexLock l(&mu_);
  report_.set_passes(report_.passes() + 1);
  report_.set_bytes_last_pass(bytes);
  report_.set_last_pass_end_unix(absl::ToUnixSeconds(absl::Now()));
  report_.clear_error();
  spdlog::info("data node {}: scrub pass done in {}: {} bytes, {} blocks and {} log records "
               "checked, {} damaged copies open",
               node_id_, absl::FormatDuration(absl::Now() - start), bytes,
               cursor.blocks_checked, cursor.log_records_checked, open_.size());
}

v1::DataNodeScrubReport Scrubber::Report() {
  std::vector<ScrubFinding> open;
  {
    absl::MutexLock l(&mu_);
    open = open_;
  }
  // Repaired, replaced or removed copies leave the list.
  std::vector<ScrubFinding> still;
  for (const ScrubFinding& f : open) {
    if (store_->StillDamaged(f)) still.push_back(f);
  }
  absl::MutexLock l(&mu_);
  // Only what was checked leaves: a copy a pass found meanwhile stays.
  std::erase_if(open_, [&](const ScrubFinding& f) {
    return std::find(open.begin(), open.end(), f) != open.end() &&
           std::find(still.begin(), still.end(), f) == still.end();
  });
  v1::DataNodeScrubReport r = report_;
  for (const ScrubFinding& f : open_) *r.add_open() = ToProto(f);
  return r;
}

}  // namespace ringcache::datanode
