// Online resize of the cache node's SSD tier: see CacheNode::ResizeSsd (cache_node.h) and
// docs/cache-node.md, "Resizing the SSD tier".
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cachenode/cache_node.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

uint32_t CacheNode::ReserveFor(uint32_t slots) const {
  return std::max<uint32_t>(16, static_cast<uint32_t>(config_.slot_reserve * slots));
}

absl::Status CacheNode::ResizeSsd(uint64_t bytes) {
  const uint64_t want = bytes / config_.block_size;
  if (want > UINT32_MAX - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("an SSD tier of ", bytes, " bytes holds more than 2^32-2 blocks"));
  }
  const auto slots = static_cast<uint32_t>(want);
  const uint32_t reserve = ReserveFor(slots);
  if (slots < reserve + 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an SSD tier of ", bytes, " bytes is too small: it must hold its slot reserve (",
        reserve, " blocks) and 16 blocks more (", uint64_t{reserve + 16} * config_.block_size,
        " bytes)"));
  }
  absl::MutexLock l(&policy_mu_);
  const uint32_t before = slots_->usable_slots();
  if (slots == before) return absl::OkStatus();  // nothing to change (a shrink follows on)
  // The new policy first: a spec that cannot be built leaves everything as it was.
  policy::PolicyContext ctx = policy_ctx_;
  ctx.capacity_blocks = slots - reserve + (map_->exclusive() ? ctx.ram_blocks : 0);
  RC_ASSIGN_OR_RETURN(std::unique_ptr<policy::CachePolicy> fresh,
                      policy::MakePolicy(config_.policy, ctx));
  for (const VdiInfo& v : vdis_->All()) {
    const v1::VdiGeometry& g = v.geometry;
    const double min = g.ssd_min_permille() / 1000.0;
    const double max = g.ssd_max_permille() == 0 ? 1.0 : g.ssd_max_permille() / 1000.0;
    if (min != 0 || max != 1) {
      if (absl::Status s = policy::SetVdiShare(fresh.get(), v.id(), min, max); !s.ok()) {
        spdlog::warn("cache node {}: VDI {} runs without its share after the resize: {}",
                     config_.node_id, g.name(), std::string(s.message()));
      }
    }
    if (!v.policy.empty()) {
      if (absl::Status s = policy::SetVdiPolicy(fresh.get(), v.id(), v.policy, ctx); !s.ok()) {
        spdlog::warn("cache node {}: VDI {} runs the node policy after the resize: {}",
                     config_.node_id, g.name(), std::string(s.message()));
      }
    }
  }
  RC_RETURN_IF_ERROR(slots_->Resize(slots));
  map_->set_slot_headroom(reserve);
  const BlockMap::Rebuilt r = map_->ReplacePolicy(std::move(fresh));
  policy_ctx_ = ctx;
  destager_->SetSlots(slots);
  uint64_t moving = 0;
  if (slots_->shrink_target() != 0) {
    moving = map_->EvictSlotsFrom(slots);
    StartShrinkWatch();
  }
  spdlog::info(
      "cache node {}: SSD tier resized from {} to {} slots of {} bytes ({}): the policy took "
      "{} blocks, evicted {} to fit{}",
      config_.node_id, before, slots, config_.block_size,
      slots >= before ? "in use at once" : "a shrink: the released slots empty in the background",
      r.members, r.evicted,
      moving > 0 ? absl::StrCat(", ", moving, " more leave the released slots") : "");
  return absl::OkStatus();
}

v1::ResizeSsdResponse CacheNode::resize_state() const {
  v1::ResizeSsdResponse st;
  st.set_ssd_bytes(uint64_t{slots_->usable_slots()} * config_.block_size);
  st.set_file_bytes(uint64_t{slots_->num_slots()} * config_.block_size);
  const uint32_t target = slots_->shrink_target();
  st.set_target_bytes(uint64_t{target} * config_.block_size);
  st.set_blocks_to_move(target != 0 ? slots_->used_past_target() : 0);
  return st;
}

void CacheNode::StartShrinkWatch() {
  absl::MutexLock l(&shrink_mu_);
  if (shrink_running_ || shrink_stop_) return;
  if (shrink_thread_.joinable()) shrink_thread_.join();  // the last one ended
  shrink_running_ = true;
  shrink_thread_ = std::thread([this] { ShrinkWatch(); });
}

void CacheNode::ShrinkWatch() {
  absl::Time next_log = absl::Now() + absl::Seconds(10);
  // The pass over the block map (under its lock, which every request takes) runs again only
  // when the count stopped falling for a while: blocks whose eviction failed and came back.
  uint32_t last_left = UINT32_MAX;
  absl::Time progress = absl::Now();
  for (;;) {
    {
      absl::MutexLock l(&shrink_mu_);
      if (shrink_stop_) break;
    }
    const uint32_t target = slots_->shrink_target();
    if (target == 0) break;  // done, or ended by a growth
    const uint32_t left = slots_->used_past_target();
    if (left < last_left) {
      last_left = left;
      progress = absl::Now();
    } else if (left > 0 && absl::Now() - progress >= absl::Seconds(5)) {
      map_->EvictSlotsFrom(target);
      progress = absl::Now();
    }
    if (left == 0) {
      if (absl::Status s = slots_->FinishShrink(); s.ok()) {
        spdlog::info("cache node {}: SSD tier shrunk to {} slots; the slot file is cut",
                     config_.node_id, target);
      } else if (!absl::IsFailedPrecondition(s)) {
        spdlog::error("cache node {}: the shrink to {} slots could not complete: {}",
                      config_.node_id, target, s.ToString());
      }
      continue;
    }
    if (absl::Now() >= next_log) {
      spdlog::info("cache node {}: shrinking the SSD tier to {} slots: {} blocks still to move",
                   config_.node_id, target, left);
      next_log = absl::Now() + absl::Seconds(10);
    }
    absl::MutexLock l(&shrink_mu_);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shrink_mu_) { return shrink_stop_; };
    shrink_mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Milliseconds(200));
  }
  absl::MutexLock l(&shrink_mu_);
  shrink_running_ = false;
}

}  // namespace ringcache::cachenode
