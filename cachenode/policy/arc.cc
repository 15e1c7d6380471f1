// ArcOrder: see arc.h. Case numbers refer to Fig. 4 of Megiddo & Modha, "ARC: A Self-Tuning, Low
// Overhead Replacement Cache", FAST 2003.
#include "cachenode/policy/arc.h"

#include <algorithm>

namespace ringcache::policy {

ArcOrder::ArcOrder(SlotTable* slots, size_t c)
    : slots_(slots), c_(static_cast<double>(c)), b1_(c), b2_(2 * c) {}

void ArcOrder::OnMiss(const BlockKey& key) {
  const double b1 = static_cast<double>(b1_.size());
  const double b2 = static_cast<double>(b2_.size());
  if (SlotId g = b1_.Find(key); g != kNoSlot) {
    // Case II: delta1 = 1 if |B1| >= |B2|, else |B2|/|B1|.
    p_ = std::min(c_, p_ + std::max(b2 / b1, 1.0));
    b1_.Erase(g);
    pending_ = Pending::kFromB1;
  } else if (SlotId g2 = b2_.Find(key); g2 != kNoSlot) {
    // Case III: delta2 = 1 if |B2| >= |B1|, else |B1|/|B2|.
    p_ = std::max(0.0, p_ - std::max(b1 / b2, 1.0));
    b2_.Erase(g2);
    pending_ = Pending::kFromB2;
  } else {
    pending_ = Pending::kNew;  // case IV
  }
}

void ArcOrder::Insert(SlotId slot) {
  if (pending_ == Pending::kNew) {
    slots_->set_aux(slot, 0);
    t1_.PushFront(slots_->links(), slot);
  } else {
    slots_->set_aux(slot, kT2);
    t2_.PushFront(slots_->links(), slot);
  }
  pending_ = Pending::kNew;
  TrimGhosts();
}

void ArcOrder::TrimGhosts() {
  // Case IV(A): |L1| = |T1| + |B1| <= c.
  while (t1_.size + b1_.size() > c_ && !b1_.empty()) b1_.PopBack();
  // Case IV(B): |L1| + |L2| <= 2c.
  while (t1_.size + t2_.size + b1_.size() + b2_.size() > 2 * c_) {
    if (!b2_.empty()) {
      b2_.PopBack();
    } else if (!b1_.empty()) {
      b1_.PopBack();
    } else {
      break;
    }
  }
}

void ArcOrder::Touch(SlotId slot) {
  // Case I.
  if (slots_->aux(slot) & kT2) {
    t2_.MoveToFront(slots_->links(), slot);
  } else {
    t1_.Unlink(slots_->links(), slot);
    slots_->set_aux(slot, kT2);
    t2_.PushFront(slots_->links(), slot);
  }
}

void ArcOrder::Remove(SlotId slot, bool evicted) {
  const bool in_t2 = (slots_->aux(slot) & kT2) != 0;
  (in_t2 ? t2_ : t1_).Unlink(slots_->links(), slot);
  if (!evicted) return;
  // REPLACE: the evicted block's key goes to the MRU end of its ghost list.
  KeyLru& ghost = in_t2 ? b2_ : b1_;
  const BlockKey key = slots_->key(slot);
  if (ghost.Find(key) == kNoSlot) ghost.PushFront(key, 0);
}

size_t ArcOrder::Candidates(absl::Span<SlotId> out) {
  const double t1 = static_cast<double>(t1_.size);
  // REPLACE(x, p).
  const bool from_t1 =
      t1_.size >= 1 && (t1 > p_ || (pending_ == Pending::kFromB2 && t1 == p_));
  const SlotList& first = (from_t1 || t2_.empty()) ? t1_ : t2_;
  const SlotList& second = (&first == &t1_) ? t2_ : t1_;
  size_t n = 0;
  for (const SlotList* l : {&first, &second}) {
    for (SlotId s = l->tail; s != kNoSlot && n < out.size(); s = slots_->links().prev(s)) {
      out[n++] = s;
    }
  }
  return n;
}

size_t ArcOrder::MetadataBytes() const {
  return sizeof(*this) + b1_.MemoryBytes() + b2_.MemoryBytes();
}

}  // namespace ringcache::policy
