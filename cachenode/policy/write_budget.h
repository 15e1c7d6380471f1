// WriteBudget: an SSD write budget (issue 36). An SSD is rated for so many drive writes per day
// over its life; a cache that fills it with every miss and every write wears it out early. The
// budget is a token bucket of SSD block writes: it refills at the budget's rate (blocks per
// second, from the drive's rating) up to `burst_seconds` of that rate, and every block the node
// writes to the SSD (a fill, a cached write, a RAM demotion) takes one token. Admission tightens
// before the bucket is empty:
//
//   fill >= tight_below   open:   nothing changes.
//   0 < fill < tight_below tight: a missed block goes around the cache (a read is served by the
//                                 data node without a fill, a write goes write-around to the data
//                                 nodes) unless it missed recently too: the doorkeeper remembers
//                                 the last `doorkeeper` keys sent around, and a key found there is
//                                 let in (a sieve of threshold 2, as the paper's sieve admits
//                                 blocks that miss again within a window).
//   fill <= 0             closed: every missed block goes around.
//
// Hits are never sent around (a cached copy, possibly dirty, is the current one), so writes to
// cached blocks still spend tokens; the bucket may go into debt, down to -burst, which keeps it
// closed until the debt is paid. Over any period longer than the burst, the SSD writes of missed
// blocks are thereby held to the budget's rate less what hits write.
//
// The same class runs in the cache node (BudgetBypass in its policy, Spend at its SSD writes)
// and in ringcache-sim (--ssd-budget), with the accesses' own clock (Access::now_us).
//
// Thread-safety: not thread-safe; the cache node calls it under its block map's lock.
#ifndef RINGCACHE_CACHENODE_POLICY_WRITE_BUDGET_H_
#define RINGCACHE_CACHENODE_POLICY_WRITE_BUDGET_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachenode/policy/bypass.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

struct WriteBudgetConfig {
  double blocks_per_second = 0;  // the budget's rate (> 0)
  double burst_seconds = 3600;   // the bucket holds this long of the rate (> 0)
  double tight_below = 0.5;      // the fill under which admission tightens, in (0, 1]
  size_t doorkeeper = 4096;      // keys sent around that a second miss lets in (>= 1)
  absl::Status Validate() const;
  // The budget of a drive rated for `bytes_per_day`, in `block_size` blocks, with a bucket of
  // `burst_seconds` and the sieve's window (capacity/4, at least 16) as its doorkeeper: what the
  // cache node and ringcache-sim both run.
  static WriteBudgetConfig ForRating(double bytes_per_day, uint32_t block_size,
                                     double burst_seconds, size_t capacity_blocks);
};

enum class BudgetState { kOpen = 0, kTight = 1, kClosed = 2 };
std::string_view BudgetStateName(BudgetState s);

class WriteBudget {
 public:
  // REQUIRES: config.Validate().ok(). The bucket starts full.
  explicit WriteBudget(const WriteBudgetConfig& config);
  WriteBudget(const WriteBudget&) = delete;
  WriteBudget& operator=(const WriteBudget&) = delete;

  // Charges `blocks` SSD block writes at `now_us` (the caller's clock; earlier times than seen
  // before count as the latest seen).
  void Spend(uint64_t blocks, uint64_t now_us);
  // Decides whether the missed `access` goes around the cache (see the table above). REQUIRES:
  // the block is not cached.
  bool GoAround(const Access& access);

  struct Snapshot {
    BudgetState state = BudgetState::kOpen;
    double fill = 1;               // tokens / bucket size; below 0 while in debt
    uint64_t written_blocks = 0;   // every block charged
    uint64_t around_reads = 0;     // read misses sent around by the budget
    uint64_t around_writes = 0;    // write misses sent around (write-around)
    uint64_t let_in = 0;           // misses let in by the doorkeeper while tight
    double rate_blocks_per_s = 0;  // SSD block writes per second, averaged over about an hour
  };
  Snapshot snapshot() const;
  const WriteBudgetConfig& config() const { return config_; }

 private:
  void Refill(uint64_t now_us);
  BudgetState State() const;

  const WriteBudgetConfig config_;
  const double depth_;  // tokens of a full bucket
  double tokens_;
  uint64_t last_us_ = 0;
  bool started_ = false;
  uint64_t written_ = 0;
  uint64_t around_reads_ = 0;
  uint64_t around_writes_ = 0;
  uint64_t let_in_ = 0;
  // The write rate, an exponential average with a one-hour time constant.
  double rate_ = 0;
  uint64_t rate_us_ = 0;
  uint64_t rate_pending_ = 0;  // blocks since rate_us_
  std::deque<BlockKey> door_order_;
  absl::flat_hash_set<BlockKey> door_;
};

// The budget as a bypass of a driver's (and of every per-VDI rule set's) chain: a miss goes
// around when the budget says so. The cache node and ringcache-sim add it through
// PolicyContext::write_budget; it is not a spec component.
class BudgetBypass final : public Bypass {
 public:
  explicit BudgetBypass(std::shared_ptr<WriteBudget> budget) : budget_(std::move(budget)) {}
  std::string_view name() const override { return "budget"; }
  bool Check(const Access& access, bool hit) override {
    return !hit && budget_->GoAround(access);
  }
  size_t MetadataBytes() const override;

 private:
  std::shared_ptr<WriteBudget> budget_;
};

// Reads an SSD's rating as a budget in bytes per day: "<x>dwpd" (drive writes per day, times
// `drive_bytes`: "1dwpd", "0.3 dwpd") or "<size>/day" ("200GiB/day", with `parse_size` reading
// the size, the caller's size syntax). kInvalidArgument naming the text otherwise.
absl::StatusOr<double> BudgetBytesPerDay(
    std::string_view text, uint64_t drive_bytes,
    const std::function<absl::StatusOr<uint64_t>(std::string_view)>& parse_size);

// The budget's rate in blocks per second for `bytes_per_day` and `block_size`.
inline double BudgetBlocksPerSecond(double bytes_per_day, uint32_t block_size) {
  return bytes_per_day / 86400.0 / block_size;
}

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_WRITE_BUDGET_H_
