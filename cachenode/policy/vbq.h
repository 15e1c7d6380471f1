// VbqSpace: VDI-Based Queues of paper 002 (CircularCache, docs/papers.md)
// §III-C/D, eq. 1-8.
//
// One queue (any Order) per VDI. With A_m the access count of VDI m and count = sum A_m:
//   L_m = A_m * S / count                                         eq. 2 (max length of queue m)
//   x_i = (A_1 - A_i) / (A_1 - A_n)   (0 hottest .. 1 coldest; A_1 max, A_n min, eq. 1)
//   U_i = U_min + x_i * (U_max - U_min)                           eq. 4 (colder: higher U)
//   D_i = D_max - x_i * (D_max - D_min)                           eq. 5 as the text reads it
//                                                                 (colder: lower D; see README)
//   1 > U_max >= U_min >= D_max >= D_min > 0                      eq. 3
// Reclaim (§III-D): it starts when the used space would exceed xi*S (checked before each
// insertion: used >= floor(xi*S)); the queues longer than U_i*L_i are reclaimed coldest first
// (smallest A first, Fig. 4), each down to D_i*L_i, and the round stops as soon as used < alpha*S.
// The bounds are fixed for a round. With U increasing and D decreasing in coldness,
// U_i - D_i grows with coldness, which is eq. 6. Eq. 7/8 (sum U_i*L_i <= xi*S) holds for every
// access distribution iff U_max <= xi, which VbqConfig::Validate checks; CheckEq8 checks one
// distribution. When every VDI is equally hot (A_1 = A_n) the hottest bounds U_min and D_max are
// used (the paper allows "U_max or U_min").
//
// Sizing by utility (share=utility, ringcache's default; not in the paper; README.md, "Sizing by
// utility"): eq. 2 gives a queue space in proportion to its accesses, so a scanning VDI gets as
// much as a VDI whose blocks are reused. With share=utility, L_m is instead a target T_m that
// follows the marginal utility of space: every queue keeps a ghost list of the keys it evicted,
// all lists the same length (ghost * S / n keys), so their hits compare; a miss on a key in queue
// m's ghost (a hit that more space for m would have given) moves `step` blocks of target to m
// from the queue whose space is worth least, the one with the fewest recent ghost hits. The
// targets always sum to S, so eq. 7/8 hold as before; U_i and D_i still come from hotness (eq. 1,
// 4, 5), so eq. 6 holds unchanged, and the reclaim rounds of §III-D run exactly as with eq. 2.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_VBQ_H_
#define RINGCACHE_CACHENODE_POLICY_VBQ_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cachenode/policy/key_lru.h"
#include "cachenode/policy/space.h"

namespace ringcache::policy {

// How L_m, the space of queue m, is set: by its accesses (paper 002 eq. 2) or by the marginal
// utility of space measured with per-queue ghost lists (see above).
enum class VbqShare { kAccesses, kUtility };

struct VbqConfig {
  // Bounds: paper 002 Table III "set2" (95-93-92-90), its better setting.
  double u_max = 0.95;
  double u_min = 0.93;
  double d_max = 0.92;
  double d_min = 0.90;
  double xi = 0.95;     // global start threshold, fraction of S
  double alpha = 0.90;  // global stop threshold, fraction of S (alpha < xi)
  // Accesses between halvings of every A_m (0: never; A_m counts since start, as eq. 2 reads).
  uint64_t decay_interval = 0;
  VbqShare share = VbqShare::kAccesses;
  // share=utility: blocks of target moved per ghost hit, and each ghost list's length as a
  // fraction of S / (number of queues) (at least kMinGhost keys).
  double step = 1;
  double ghost = 1;
  static constexpr size_t kMinGhost = 64;

  // Checks eq. 3, 0 < alpha < xi <= 1, and eq. 8 for every access distribution (U_max <= xi).
  absl::Status Validate() const;
  // Returns the left side of eq. 8 for the given access counts (sum U_i*L_i / S, eq. 7 / S).
  double Eq8Lhs(absl::Span<const uint64_t> accesses) const;
  // Checks eq. 8 for one access distribution.
  absl::Status CheckEq8(absl::Span<const uint64_t> accesses) const;
};

// The bounds of one queue, per eq. 2, 4 and 5.
struct VbqBounds {
  double max_len = 0;  // L_i
  double upper = 0;    // U_i
  double lower = 0;    // D_i
};

// Returns the bounds of a queue with `a` accesses, given the largest (a1) and smallest (an) access
// counts, their sum `count` and the cache size `s`.
VbqBounds ComputeVbqBounds(const VbqConfig& config, uint64_t a, uint64_t a1, uint64_t an,
                           uint64_t count, double s);

class VbqSpace final : public Space {
 public:
  // `slots` is not owned. REQUIRES: config.Validate().ok(), capacity == slots->capacity().
  VbqSpace(size_t capacity, const VbqConfig& config, SlotTable* slots, OrderFactory make_order);

  std::string_view name() const override { return "vbq"; }
  uint32_t OnAccess(uint32_t vdi) override;
  bool OnMiss(uint32_t q, const BlockKey& key) override;
  void OnEvicted(uint32_t q, const BlockKey& key) override;
  uint32_t QueueOf(uint32_t vdi) const override;
  Order& queue(uint32_t q) override { return *queues_[q].order; }
  uint32_t QueueVdi(uint32_t q) const override { return queues_[q].vdi; }
  absl::Status ReplaceOrder(uint32_t vdi, const OrderFactory* make) override;
  bool NeedsReclaim(size_t used) const override { return used >= trigger_; }
  void BeginReclaim(size_t used) override;
  uint32_t NextReclaimQueue(size_t used) override;
  uint32_t FallbackQueue() const override;
  // The queue furthest above its share L_m (len / L_m largest; eq. 2, or the utility target).
  uint32_t ShedQueue() const override;
  // Composition with the bounds (README.md, "Shares per VDI"): L_i is clamped to
  // [min x S, max x S]; a round never takes a queue below min x S; an insertion into a queue at
  // max x S evicts from it first. The mins of all VDIs may sum to at most alpha.
  absl::Status SetShare(uint32_t vdi, double min, double max) override;
  bool AtMaxShare(uint32_t q) const override;
  void AppendVdiStats(std::vector<VdiStats>* out) const override;
  size_t MetadataBytes() const override;

  size_t queue_count() const override { return queues_.size(); }
  // Returns sum U_i*L_i / S for the current access counts (the left side of eq. 8).
  double UpperSumFraction() const;
  // Returns the VDIs of the current round's plan, coldest first (for tests).
  std::vector<uint32_t> PlanForTest() const;

 private:
  struct Queue {
    uint32_t vdi;
    uint64_t accesses;  // A_m
    std::unique_ptr<Order> order;
    // share=utility only:
    double target = 0;              // T_m, the queue's L_m
    double ghost_hits = 0;          // recent ghost hits (halved every S accesses)
    std::unique_ptr<KeyLru> ghost;  // keys this queue evicted
    // The VDI's share (SetShare), in blocks: 0 and capacity when it has none.
    double min_blocks = 0;
    double max_blocks = std::numeric_limits<double>::infinity();
  };
  struct PlanItem {
    uint32_t q;
    double target;  // D_i * L_i
  };
  // Returns the queue of `vdi`, creating it (with no access counted) if it has none.
  uint32_t EnsureQueue(uint32_t vdi);
  // Largest and smallest A over all queues.
  void Extremes(uint64_t* a1, uint64_t* an) const;
  // The bounds of queue `q` (eq. 2 or its utility target, eq. 4, eq. 5).
  VbqBounds Bounds(const Queue& q, uint64_t a1, uint64_t an) const;
  // share=utility: a new queue takes S/n of target from the others, in proportion to theirs.
  void AddTarget(Queue* fresh);
  // share=utility: moves up to `step` blocks of target to queue `q` from the least useful one.
  void Grow(uint32_t q);
  // share=utility: the length of every ghost list, ghost * S / n keys (at least kMinGhost).
  size_t GhostBound() const;
  void Decay();

  size_t capacity_;
  VbqConfig config_;
  SlotTable* slots_;
  OrderFactory make_order_;
  size_t trigger_;  // floor(xi * S)
  double stop_;     // alpha * S
  std::vector<Queue> queues_;
  // VDI -> queue: a direct table for small ids (the common case), a hash map for the rest.
  static constexpr uint32_t kDirectVdis = 4096;
  std::vector<uint32_t> direct_;
  absl::flat_hash_map<uint32_t, uint32_t> by_vdi_;
  uint64_t count_ = 0;  // sum of A_m
  uint64_t since_decay_ = 0;
  uint64_t since_utility_decay_ = 0;
  std::vector<PlanItem> plan_;
  size_t plan_pos_ = 0;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_VBQ_H_
