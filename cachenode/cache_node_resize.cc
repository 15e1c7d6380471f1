// Online resize of the cache node's SSD and RAM tiers: see CacheNode::Resize (cache_node.h) and
// docs/cache-node.md, "Resizing the tiers".
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cachenode/cache_node.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

uint32_t CacheNode::ReserveFor(uint32_t slots) const {
  return std::max<uint32_t>(16, static_cast<uint32_t>(config_.slot_reserve * slots));
}

namespace {

// <state>.ram records a RAM tier resized online: "ram_bytes N configured M", M being the
// configured size it replaced. A start whose configuration still says M keeps N; an edited
// configuration wins (the operator decided again).
std::string RamRecordPath(const CacheNodeConfig& c) { return c.StateBase() + ".ram"; }

}  // namespace

uint64_t CacheNode::RamBytesAtStart() const {
  absl::StatusOr<std::string> r = ReadStateFile(RamRecordPath(config_));
  if (!r.ok()) return config_.ram_bytes;
  const std::vector<absl::string_view> f =
      absl::StrSplit(absl::StripAsciiWhitespace(*r), ' ', absl::SkipEmpty());
  uint64_t bytes = 0, configured = 0;
  if (f.size() != 4 || f[0] != "ram_bytes" || f[2] != "configured" ||
      !absl::SimpleAtoi(f[1], &bytes) || !absl::SimpleAtoi(f[3], &configured) || bytes == 0) {
    spdlog::warn("cache node {}: {} is not a RAM tier record; the configured size ({} bytes) is "
                 "used",
                 config_.node_id, RamRecordPath(config_), config_.ram_bytes);
    return config_.ram_bytes;
  }
  if (configured != config_.ram_bytes || config_.ram_bytes == 0) {
    spdlog::info("cache node {}: the RAM tier's configured size changed since it was resized "
                 "online; the configuration ({} bytes) is used",
                 config_.node_id, config_.ram_bytes);
    std::remove(RamRecordPath(config_).c_str());
    return config_.ram_bytes;
  }
  if (bytes != config_.ram_bytes) {
    spdlog::warn("cache node {}: the RAM tier was resized online to {} bytes; the configured size "
                 "({} bytes) is not used (set it in the node's configuration)",
                 config_.node_id, bytes, config_.ram_bytes);
  }
  return bytes;
}

absl::Status CacheNode::Resize(uint64_t ssd_bytes, uint64_t ram_bytes) {
  absl::MutexLock l(&policy_mu_);
  const uint32_t slots_before = slots_->usable_slots();
  uint32_t slots = slots_before;
  if (ssd_bytes != 0) {
    const uint64_t want = ssd_bytes / config_.block_size;
    if (want > UINT32_MAX - 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("an SSD tier of ", ssd_bytes, " bytes holds more than 2^32-2 blocks"));
    }
    slots = static_cast<uint32_t>(want);
    const uint32_t reserve = ReserveFor(slots);
    if (slots < reserve + 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an SSD tier of ", ssd_bytes, " bytes is too small: it must hold its slot reserve (",
          reserve, " blocks) and 16 blocks more (", uint64_t{reserve + 16} * config_.block_size,
          " bytes)"));
    }
  }
  const size_t ram_before = map_->ram_capacity();
  size_t ram = ram_before;
  if (ram_bytes != 0) {
    if (ram_before == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cache node ", config_.node_id, " runs without a RAM tier (ram_bytes 0 in its "
          "configuration): a restart with ram_bytes set adds one"));
    }
    ram = ram_bytes / config_.block_size;
    if (ram == 0) {
      return absl::InvalidArgumentError(absl::StrCat("a RAM tier of ", ram_bytes,
                                                     " bytes holds no block of ",
                                                     config_.block_size, " bytes"));
    }
  }
  if (slots == slots_before && ram == ram_before) return absl::OkStatus();  // a shrink follows on
  const uint32_t reserve = ReserveFor(slots);
  policy::PolicyContext ctx = policy_ctx_;
  ctx.ram_blocks = ram;
  ctx.capacity_blocks = slots - reserve + (map_->exclusive() ? ram : 0);
  // The policy is rebuilt when its capacity changes (the SSD, or an exclusive RAM tier, which
  // adds to it) or a complete policy's own RAM tier does. The new one is built first: a spec
  // that cannot be built leaves everything as it was.
  std::unique_ptr<policy::CachePolicy> fresh;
  if (ctx.capacity_blocks != policy_ctx_.capacity_blocks ||
      (ram != ram_before && policy::IsCompletePolicy(config_.policy))) {
    RC_ASSIGN_OR_RETURN(fresh, BuildPolicyFor(ctx));
  }
  // The RAM record before anything changes (a failure leaves all as it was); put back if the
  // SSD's resize then fails.
  auto record_ram = [this](size_t blocks) {
    return WriteFileAtomically(RamRecordPath(config_),
                               absl::StrCat("ram_bytes ", uint64_t{blocks} * config_.block_size,
                                            " configured ", config_.ram_bytes, "\n"));
  };
  if (ram != ram_before) RC_RETURN_IF_ERROR(record_ram(ram));
  if (slots != slots_before) {
    if (absl::Status s = slots_->Resize(slots); !s.ok()) {
      if (ram != ram_before) record_ram(ram_before).IgnoreError();
      return s;
    }
  }
  map_->set_slot_headroom(reserve);
  BlockMap::Rebuilt r;
  const bool rebuilt = fresh != nullptr;
  if (rebuilt) r = map_->ReplacePolicy(std::move(fresh));
  policy_ctx_ = ctx;
  const uint64_t demoted = ram != ram_before ? map_->ResizeRam(ram) : 0;
  uint64_t moving = 0;
  if (slots != slots_before) {
    destager_->SetSlots(slots);
    if (slots_->shrink_target() != 0) {
      moving = map_->EvictSlotsFrom(slots);
      StartShrinkWatch();
    }
  }
  spdlog::info(
      "cache node {}: tiers resized: SSD {} -> {} slots of {} bytes{}, RAM {} -> {} blocks{}; "
      "{}",
      config_.node_id, slots_before, slots, config_.block_size,
      slots >= slots_before ? "" : " (a shrink: the released slots empty in the background)",
      ram_before, ram, demoted > 0 ? absl::StrCat(" (", demoted, " demoted to the SSD)") : "",
      rebuilt
          ? absl::StrCat("the policy took ", r.members, " blocks, evicted ", r.evicted, " to fit",
                         moving > 0 ? absl::StrCat(", ", moving, " more leave the released slots")
                                    : "")
          : "the policy is unchanged");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<policy::CachePolicy>> CacheNode::BuildPolicyFor(
    const policy::PolicyContext& ctx) const {
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
  return fresh;
}

v1::ResizeTiersResponse CacheNode::resize_state() const {
  v1::ResizeTiersResponse st;
  st.set_ssd_bytes(uint64_t{slots_->usable_slots()} * config_.block_size);
  st.set_file_bytes(uint64_t{slots_->num_slots()} * config_.block_size);
  const uint32_t target = slots_->shrink_target();
  st.set_target_bytes(uint64_t{target} * config_.block_size);
  st.set_blocks_to_move(target != 0 ? slots_->used_past_target() : 0);
  st.set_ram_bytes(uint64_t{map_->ram_capacity()} * config_.block_size);
  st.set_ram_used_bytes(uint64_t{map_->ram_held()} * config_.block_size);
  st.set_configured_ssd_bytes(config_.ssd_bytes / config_.block_size * config_.block_size);
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
