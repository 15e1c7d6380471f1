// VbqSpace: see vbq.h (paper 002 §III-C/D, eq. 1-8, Fig. 4).
#include "cachenode/policy/vbq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringcache::policy {
namespace {

// Tolerance of the comparisons between block counts and fractions of S.
constexpr double kEps = 1e-9;

}  // namespace

absl::Status VbqConfig::Validate() const {
  // Eq. 3.
  if (!(1 > u_max && u_max >= u_min && u_min >= d_max && d_max >= d_min && d_min > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "vbq: bounds must satisfy 1 > umax >= umin >= dmax >= dmin > 0 (paper 002 eq. 3); got "
        "umax=%g umin=%g dmax=%g dmin=%g",
        u_max, u_min, d_max, d_min));
  }
  if (!(0 < alpha && alpha < xi && xi <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vbq: need 0 < alpha < xi <= 1; got alpha=%g xi=%g", alpha, xi));
  }
  // Eq. 8: U_min + (U_max - U_min) * (A_1 - sum A^2 / sum A) / (A_1 - A_n) <= xi. The fraction is
  // in [0, 1) and approaches 1 (one hot VDI, many cold ones), so it holds for every distribution
  // iff U_max <= xi.
  if (!(step > 0) || !(ghost > 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vbq: step and ghost must be positive; got step=%g ghost=%g", step, ghost));
  }
  if (u_max > xi) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "vbq: umax=%g > xi=%g breaks eq. 8 (sum U_i*L_i <= xi*S) for skewed VDI access counts",
        u_max, xi));
  }
  return absl::OkStatus();
}

double VbqConfig::Eq8Lhs(absl::Span<const uint64_t> accesses) const {
  if (accesses.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(accesses.begin(), accesses.end());
  const double a1 = static_cast<double>(*hi), an = static_cast<double>(*lo);
  if (a1 == an) return u_min;  // equal hotness: every U_i = U_min (vbq.h)
  double sum = 0, sum_sq = 0;
  for (uint64_t a : accesses) {
    sum += static_cast<double>(a);
    sum_sq += static_cast<double>(a) * static_cast<double>(a);
  }
  return u_min + (u_max - u_min) / (a1 - an) * (a1 - sum_sq / sum);  // eq. 8
}

absl::Status VbqConfig::CheckEq8(absl::Span<const uint64_t> accesses) const {
  const double lhs = Eq8Lhs(accesses);
  if (lhs > xi + 1e-12) {
    return absl::FailedPreconditionError(absl::StrFormat("vbq: eq. 8 fails: %g > xi=%g", lhs, xi));
  }
  return absl::OkStatus();
}

VbqBounds ComputeVbqBounds(const VbqConfig& config, uint64_t a, uint64_t a1, uint64_t an,
                           uint64_t count, double s) {
  VbqBounds b;
  b.max_len = count == 0 ? 0.0 : static_cast<double>(a) * s / static_cast<double>(count);  // eq. 2
  // x = 0 for the hottest queue, 1 for the coldest; equal hotness takes the hottest bounds.
  const double x = a1 == an ? 0.0 : static_cast<double>(a1 - a) / static_cast<double>(a1 - an);
  b.upper = config.u_min + x * (config.u_max - config.u_min);  // eq. 4
  b.lower = config.d_max - x * (config.d_max - config.d_min);  // eq. 5, colder lower (README)
  return b;
}

VbqSpace::VbqSpace(size_t capacity, const VbqConfig& config, SlotTable* slots,
                   OrderFactory make_order)
    : capacity_(capacity),
      config_(config),
      slots_(slots),
      make_order_(std::move(make_order)),
      // kEps absorbs binary rounding of products such as xi * S.
      trigger_(static_cast<size_t>(std::floor(config.xi * static_cast<double>(capacity) + kEps))),
      stop_(config.alpha * static_cast<double>(capacity) - kEps) {}

uint32_t VbqSpace::OnAccess(uint32_t vdi) {
  const uint32_t q = EnsureQueue(vdi);
  ++queues_[q].accesses;  // A_m, eq. 1
  ++count_;
  if (config_.decay_interval > 0 && ++since_decay_ >= config_.decay_interval) Decay();
  if (config_.share == VbqShare::kUtility && ++since_utility_decay_ >= capacity_) {
    // Ghost hits count for about one cache turnover: halved every S accesses.
    since_utility_decay_ = 0;
    for (Queue& x : queues_) x.ghost_hits /= 2;
  }
  return q;
}

absl::Status VbqSpace::ReplaceOrder(uint32_t vdi, const OrderFactory* make) {
  const uint32_t q = EnsureQueue(vdi);
  std::unique_ptr<Order> fresh =
      make != nullptr && *make ? (*make)(slots_, capacity_) : make_order_(slots_, capacity_);
  Order& old = *queues_[q].order;
  // Tail first: each block enters the new order at its head, so the old head ends up there too.
  std::vector<SlotId> blocks;
  blocks.reserve(old.size());
  SlotId s;
  while (old.Candidates(absl::MakeSpan(&s, 1)) == 1) {
    old.Remove(s, /*evicted=*/false);
    blocks.push_back(s);
  }
  for (SlotId b : blocks) fresh->Insert(b);
  queues_[q].order = std::move(fresh);
  return absl::OkStatus();
}

uint32_t VbqSpace::EnsureQueue(uint32_t vdi) {
  uint32_t q = QueueOf(vdi);
  if (q == kNoQueue) {
    q = static_cast<uint32_t>(queues_.size());
    queues_.push_back(Queue{vdi, 0, make_order_(slots_, capacity_), 0, 0, nullptr});
    if (config_.share == VbqShare::kUtility) AddTarget(&queues_.back());
    if (vdi < kDirectVdis) {
      if (direct_.size() <= vdi) direct_.resize(vdi + 1, kNoQueue);
      direct_[vdi] = q;
    } else {
      by_vdi_.emplace(vdi, q);
    }
  }
  return q;
}

void VbqSpace::AddTarget(Queue* fresh) {
  const double s = static_cast<double>(capacity_);
  const double n = static_cast<double>(queues_.size());
  // The others keep (n-1)/n of their targets, so the sum stays S.
  for (Queue& x : queues_) x.target *= (n - 1) / n;
  fresh->target = s / n;
  fresh->ghost = std::make_unique<KeyLru>(std::max(capacity_, VbqConfig::kMinGhost));
}

size_t VbqSpace::GhostBound() const {
  return std::max(VbqConfig::kMinGhost,
                  static_cast<size_t>(config_.ghost * static_cast<double>(capacity_) /
                                      static_cast<double>(queues_.size())));
}

bool VbqSpace::OnMiss(uint32_t q, const BlockKey& key) {
  if (config_.share != VbqShare::kUtility) return false;
  Queue& x = queues_[q];
  const SlotId g = x.ghost->Find(key);
  if (g == kNoSlot) return false;
  x.ghost->Erase(g);
  x.ghost_hits += 1;
  Grow(q);
  return true;
}

void VbqSpace::Grow(uint32_t q) {
  // The donor is the queue whose space is worth least: the fewest recent ghost hits (the ghost
  // lists are equally long, so the counts compare; ties: the larger target). A queue keeps at
  // least S/(64 n) of target, so it keeps blocks to evict into its ghost list, which can show
  // when its space is worth more again.
  const double floor =
      static_cast<double>(capacity_) / (64.0 * static_cast<double>(queues_.size()));
  uint32_t donor = kNoQueue;
  double best = 0;
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    const Queue& x = queues_[i];
    if (i == q || x.target <= floor) continue;
    const double worth = x.ghost_hits;
    if (donor == kNoQueue || worth < best || (worth == best && x.target > queues_[donor].target)) {
      donor = i;
      best = worth;
    }
  }
  if (donor == kNoQueue) return;
  const double moved = std::min(config_.step, queues_[donor].target - floor);
  queues_[donor].target -= moved;
  queues_[q].target += moved;
}

void VbqSpace::OnEvicted(uint32_t q, const BlockKey& key) {
  if (config_.share != VbqShare::kUtility) return;
  Queue& x = queues_[q];
  KeyLru& ghost = *x.ghost;
  if (ghost.Find(key) == kNoSlot) ghost.PushFront(key, 0);
  while (ghost.size() > GhostBound()) ghost.PopBack();
}

VbqBounds VbqSpace::Bounds(const Queue& q, uint64_t a1, uint64_t an) const {
  VbqBounds b =
      ComputeVbqBounds(config_, q.accesses, a1, an, count_, static_cast<double>(capacity_));
  if (config_.share == VbqShare::kUtility) b.max_len = q.target;
  b.max_len = std::clamp(b.max_len, q.min_blocks, std::max(q.min_blocks, q.max_blocks));
  return b;
}

void VbqSpace::Decay() {
  since_decay_ = 0;
  count_ = 0;
  for (Queue& q : queues_) {
    q.accesses /= 2;
    count_ += q.accesses;
  }
}

uint32_t VbqSpace::QueueOf(uint32_t vdi) const {
  if (vdi < kDirectVdis) return vdi < direct_.size() ? direct_[vdi] : kNoQueue;
  auto it = by_vdi_.find(vdi);
  return it == by_vdi_.end() ? kNoQueue : it->second;
}

void VbqSpace::Extremes(uint64_t* a1, uint64_t* an) const {
  *a1 = 0;
  *an = ~uint64_t{0};
  for (const Queue& q : queues_) {
    *a1 = std::max(*a1, q.accesses);
    *an = std::min(*an, q.accesses);
  }
  if (queues_.empty()) *an = 0;
}

void VbqSpace::BeginReclaim(size_t used) {
  (void)used;
  plan_.clear();
  plan_pos_ = 0;
  uint64_t a1, an;
  Extremes(&a1, &an);
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    const size_t len = queues_[i].order->size();
    if (len == 0) continue;
    const VbqBounds b = Bounds(queues_[i], a1, an);
    // Only queues above their upper bound are reclaimed, down to their lower bound (§III-D),
    // and never below their minimum share.
    const double floor = queues_[i].min_blocks;
    if (static_cast<double>(len) > std::max(b.upper * b.max_len, floor) + kEps) {
      plan_.push_back(PlanItem{i, std::max(b.lower * b.max_len, floor)});
    }
  }
  // Coldest first (Fig. 4: VDI_5, then VDI_4, ...); ties by VDI id for determinism.
  std::sort(plan_.begin(), plan_.end(), [this](const PlanItem& x, const PlanItem& y) {
    const Queue& qx = queues_[x.q];
    const Queue& qy = queues_[y.q];
    if (qx.accesses != qy.accesses) return qx.accesses < qy.accesses;
    return qx.vdi < qy.vdi;
  });
}

uint32_t VbqSpace::NextReclaimQueue(size_t used) {
  // The round stops once used space is under alpha * S.
  if (static_cast<double>(used) < stop_) {
    plan_pos_ = plan_.size();
    return kNoQueue;
  }
  while (plan_pos_ < plan_.size()) {
    const PlanItem& item = plan_[plan_pos_];
    if (static_cast<double>(queues_[item.q].order->size()) > item.target + kEps) return item.q;
    ++plan_pos_;
  }
  return kNoQueue;
}

uint32_t VbqSpace::FallbackQueue() const {
  // The coldest queue above its minimum share; only when every queue is at or below its
  // minimum, the coldest of those.
  uint32_t best = kNoQueue;
  bool best_above = false;
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    const size_t len = queues_[i].order->size();
    if (len == 0) continue;
    const bool above = static_cast<double>(len) > queues_[i].min_blocks + kEps;
    if (best != kNoQueue && best_above && !above) continue;
    if (best == kNoQueue || (above && !best_above) ||
        queues_[i].accesses < queues_[best].accesses ||
        (queues_[i].accesses == queues_[best].accesses && queues_[i].vdi < queues_[best].vdi)) {
      best = i;
      best_above = above;
    }
  }
  return best;
}

absl::Status VbqSpace::SetShare(uint32_t vdi, double min, double max) {
  if (!(min >= 0 && min <= 1 && max > 0 && max <= 1 && min <= max)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VDI ", vdi, " share: need 0 <= min (", min, ") <= max (", max, ") <= 1, max > 0"));
  }
  const double s = static_cast<double>(capacity_);
  double mins = min;
  for (const Queue& q : queues_) {
    if (q.vdi != vdi) mins += q.min_blocks / s;
  }
  if (mins > config_.alpha + kEps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VDI ", vdi, " share: the minimum shares of the node's VDIs would sum to ", mins,
        ", more than the ", config_.alpha, " of the cache that reclaim rounds keep"));
  }
  // No share for a VDI without a queue yet: nothing to do (creating its queue would give an idle
  // VDI a part of the utility targets before its first access).
  if (min == 0 && max >= 1 && QueueOf(vdi) == kNoQueue) return absl::OkStatus();
  Queue& q = queues_[EnsureQueue(vdi)];
  q.min_blocks = min * s;
  q.max_blocks = max >= 1 ? std::numeric_limits<double>::infinity() : max * s;
  return absl::OkStatus();
}

bool VbqSpace::AtMaxShare(uint32_t q) const {
  return static_cast<double>(queues_[q].order->size()) + 1 > queues_[q].max_blocks + kEps;
}

uint32_t VbqSpace::ShedQueue() const {
  uint64_t a1, an;
  Extremes(&a1, &an);
  // A queue at or below its minimum share sheds only when every other queue is too.
  uint32_t best = kNoQueue;
  double best_ratio = 0;
  bool best_above = false;
  for (uint32_t i = 0; i < queues_.size(); ++i) {
    const size_t len = queues_[i].order->size();
    if (len == 0) continue;
    const bool above = static_cast<double>(len) > queues_[i].min_blocks + kEps;
    if (best != kNoQueue && best_above && !above) continue;
    const double max_len = Bounds(queues_[i], a1, an).max_len;
    const double ratio = max_len > kEps ? static_cast<double>(len) / max_len
                                        : std::numeric_limits<double>::infinity();
    if (best == kNoQueue || (above && !best_above) || ratio > best_ratio) {
      best = i;
      best_ratio = ratio;
      best_above = above;
    }
  }
  return best;
}

void VbqSpace::AppendVdiStats(std::vector<VdiStats>* out) const {
  uint64_t a1, an;
  Extremes(&a1, &an);
  for (const Queue& q : queues_) {
    const VbqBounds b = Bounds(q, a1, an);
    out->push_back(VdiStats{q.vdi, q.accesses, q.order->size(), b.max_len, b.upper, b.lower});
  }
}

double VbqSpace::UpperSumFraction() const {
  uint64_t a1, an;
  Extremes(&a1, &an);
  const double s = static_cast<double>(capacity_);
  double sum = 0;
  for (const Queue& q : queues_) {
    const VbqBounds b = Bounds(q, a1, an);
    sum += b.upper * b.max_len;  // eq. 7
  }
  return s == 0 ? 0 : sum / s;
}

std::vector<uint32_t> VbqSpace::PlanForTest() const {
  std::vector<uint32_t> vdis;
  for (const PlanItem& p : plan_) vdis.push_back(queues_[p.q].vdi);
  return vdis;
}

size_t VbqSpace::MetadataBytes() const {
  size_t bytes = sizeof(*this) + queues_.capacity() * sizeof(Queue) +
                 direct_.capacity() * sizeof(uint32_t) +
                 by_vdi_.capacity() * (sizeof(std::pair<uint32_t, uint32_t>) + 1) +
                 plan_.capacity() * sizeof(PlanItem);
  for (const Queue& q : queues_) {
    bytes += q.order->MetadataBytes();
    if (q.ghost) bytes += q.ghost->MemoryBytes();
  }
  return bytes;
}

}  // namespace ringcache::policy
