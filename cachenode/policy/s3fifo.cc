// S3FifoOrder: see s3fifo.h (Algorithm 1 of the S3-FIFO paper).
#include "cachenode/policy/s3fifo.h"

#include <algorithm>
#include <cmath>

namespace ringcache::policy {

absl::Status S3FifoConfig::Validate() const {
  if (!(small_ratio > 0 && small_ratio < 1)) {
    return absl::InvalidArgumentError("s3fifo: small must be in (0, 1)");
  }
  if (!(ghost_ratio > 0 && ghost_ratio <= 4)) {
    return absl::InvalidArgumentError("s3fifo: ghost must be in (0, 4]");
  }
  if (move_threshold < 1 || move_threshold > 3) {
    return absl::InvalidArgumentError("s3fifo: move must be 1, 2 or 3 (2-bit frequency)");
  }
  return absl::OkStatus();
}

S3FifoOrder::S3FifoOrder(SlotTable* slots, size_t capacity, const S3FifoConfig& config)
    : slots_(slots),
      config_(config),
      ghost_(std::max<size_t>(1, static_cast<size_t>(
                                     std::llround(config.ghost_ratio * static_cast<double>(capacity))))) {}

void S3FifoOrder::OnMiss(const BlockKey& key) {
  const SlotId g = ghost_.Find(key);
  pending_ghost_hit_ = g != kNoSlot;
  if (pending_ghost_hit_) ghost_.Erase(g);
}

void S3FifoOrder::Insert(SlotId slot) {
  if (pending_ghost_hit_) {
    slots_->set_aux(slot, kInMain);
    main_.PushFront(slots_->links(), slot);
  } else {
    slots_->set_aux(slot, 0);
    small_.PushFront(slots_->links(), slot);
  }
  pending_ghost_hit_ = false;
}

void S3FifoOrder::Touch(SlotId slot) {
  const uint8_t aux = slots_->aux(slot);
  const uint8_t f = Freq(aux);
  if (f < 3) slots_->set_aux(slot, WithFreq(aux, f + 1));
}

void S3FifoOrder::Remove(SlotId slot, bool evicted) {
  const bool in_main = (slots_->aux(slot) & kInMain) != 0;
  (in_main ? main_ : small_).Unlink(slots_->links(), slot);
  // Only blocks evicted from S are remembered in G.
  if (evicted && !in_main) {
    const BlockKey key = slots_->key(slot);
    if (ghost_.Find(key) == kNoSlot) ghost_.PushFront(key, 0);
  }
}

const SlotList* S3FifoOrder::SettleVictim() {
  SlotTable& links = *slots_;
  // Each M block is reinserted at most 3 times (freq is 2 bits) and each S block moves at most
  // once, so the loop ends.
  while (!small_.empty() || !main_.empty()) {
    const double target_small =
        std::max(1.0, config_.small_ratio * static_cast<double>(size()));
    if (!small_.empty() && (static_cast<double>(small_.size) >= target_small || main_.empty())) {
      const SlotId t = small_.tail;
      const uint8_t aux = slots_->aux(t);
      if (Freq(aux) >= config_.move_threshold) {
        small_.Unlink(links, t);
        slots_->set_aux(t, kInMain);  // freq reset to 0 on promotion
        main_.PushFront(links, t);
        continue;
      }
      return &small_;
    }
    const SlotId t = main_.tail;
    const uint8_t aux = slots_->aux(t);
    if (Freq(aux) > 0) {
      main_.MoveToFront(links, t);
      slots_->set_aux(t, WithFreq(aux, Freq(aux) - 1));
      continue;
    }
    return &main_;
  }
  return nullptr;
}

size_t S3FifoOrder::Candidates(absl::Span<SlotId> out) {
  const SlotList* first = SettleVictim();
  if (first == nullptr || out.empty()) return 0;
  const SlotList* second = (first == &small_) ? &main_ : &small_;
  size_t n = 0;
  for (const SlotList* l : {first, second}) {
    for (SlotId s = l->tail; s != kNoSlot && n < out.size(); s = slots_->links().prev(s)) {
      out[n++] = s;
    }
  }
  return n;
}

}  // namespace ringcache::policy
