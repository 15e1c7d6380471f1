// Vocabulary of the policy engine: block keys, accesses, outcomes, and the CachePolicy interface
// that the cache node and ringcache-sim both drive.
//
// Everything under cachenode/policy/ is pure: no I/O, no clock, no threads, no dependency beyond
// abseil. Time (Access::now_us) and data-node load (LoadView) come in as inputs. Policy objects are
// not thread-safe; the cache node serialises calls per policy instance.
#ifndef RINGCACHE_CACHENODE_POLICY_TYPES_H_
#define RINGCACHE_CACHENODE_POLICY_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

namespace ringcache::policy {

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// A cache block's identity: the VDI's numeric id and the block index inside the VDI
// (byte offset / cache block size).
struct BlockKey {
  uint32_t vdi = 0;
  uint64_t block = 0;

  friend bool operator==(const BlockKey&, const BlockKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& k) {
    return H::combine(std::move(h), k.vdi, k.block);
  }
};

enum class Op : uint8_t { kRead, kWrite };
enum class Tier : uint8_t { kNone, kRam, kSsd };

// One block access as a policy sees it.
struct Access {
  BlockKey key;
  Op op = Op::kRead;
  uint64_t now_us = 0;      // caller's time: virtual in the simulator, monotonic in the node
  uint64_t seq = 0;         // index of this access in the stream (0, 1, 2, ...)
  uint64_t next_use = kNever;  // seq of the next access to the same key; only offline OPT reads it
};

// A block that left the cache. A dirty one must be written home before its slot is reused.
struct Eviction {
  BlockKey key;
  bool dirty = false;
  Tier from = Tier::kSsd;
};

// What one access did. The caller owns it and reuses it across calls; Reset() keeps the capacity
// of `evicted`, so the steady state allocates nothing.
struct Outcome {
  Tier hit = Tier::kNone;     // where the block was found; kNone is a miss
  bool bypassed = false;      // sent past the cache (CMF, sequential cutoff, write-around)
  bool admitted = false;      // a missed block was inserted
  bool rejected = false;      // admission declined to insert a missed block
  uint32_t ssd_writes = 0;    // blocks written to the SSD tier (fill, write, RAM demotion)
  uint32_t promotions = 0;    // SSD -> RAM moves
  std::vector<Eviction> evicted;

  void Reset() {
    hit = Tier::kNone;
    bypassed = admitted = rejected = false;
    ssd_writes = promotions = 0;
    evicted.clear();
  }
};

// Data-node load, an input to load-aware victim choice (paper 004, LCR). Implemented by the cache
// node from live queue depth × latency, and by the simulator from its device model.
class LoadView {
 public:
  virtual ~LoadView() = default;
  // Returns the load of `key`'s object's most loaded home data node (lower is better): its
  // destage writes every home and ends with the slowest.
  virtual double HomeLoad(const BlockKey& key) const = 0;
};

// Per-VDI state of a policy that keeps one queue per VDI (VBQ, paper 002 eq. 1-5), for metrics and
// the simulator's per-VDI rows. Policies with a single queue report none.
struct VdiStats {
  uint32_t vdi = 0;
  uint64_t accesses = 0;    // A_m (eq. 1)
  size_t blocks = 0;        // blocks cached in the VDI's queue
  double max_blocks = 0;    // L_m = A_m * S / count (eq. 2)
  double upper = 0;         // U_i (eq. 4)
  double lower = 0;         // D_i (eq. 5, see cachenode/policy/README.md)
  double admit_first = -1;  // adaptive sieve: fraction of first read misses admitted; -1: none
  // Frequency gate (sieve(freq=1)): mean sketch estimate of the VDI's recent victims, the bar a
  // first miss must pass by the margin; -1: no gate, or nothing of the VDI evicted yet.
  double admit_bar = -1;
  // The region test's margin for the VDI (sieve(region_adapt=1)); -1: fixed, or nothing of the
  // VDI admitted by the region test yet.
  double region_margin = -1;
  // The write budget's margin for the VDI (sieve(budget=B)): the accesses more every admission
  // test asks for; -1: no budget, or nothing of the VDI admitted under it yet.
  double budget_margin = -1;
};

// A whole cache configuration (admission + space + order + victim choice + tiers) behind one
// interface. The shared driver implements it, as do the two-level tier caches and offline OPT.
class CachePolicy {
 public:
  virtual ~CachePolicy() = default;

  virtual std::string_view name() const = 0;
  // Processes one block access and fills *out (the callee calls out->Reset() first).
  // A write makes the block dirty (write-back) unless the access is bypassed.
  virtual void OnAccess(const Access& access, Outcome* out) = 0;
  // Marks a cached block clean after its destage completed. Returns false if it is not cached.
  virtual bool MarkClean(const BlockKey& key) = 0;
  // Drops a block (trim, VDI delete) without a destage. Returns false if it is not cached.
  virtual bool Erase(const BlockKey& key) = 0;
  // Reports whether `key` is cached, and where, without changing any state.
  virtual Tier Lookup(const BlockKey& key) const = 0;
  virtual size_t size() const = 0;       // blocks cached, all tiers
  virtual size_t capacity() const = 0;   // blocks, all tiers
  virtual size_t dirty_count() const = 0;
  // Returns the bytes of metadata this policy holds (index, lists, ghosts, admission state).
  virtual size_t MetadataBytes() const = 0;
  // Appends one row per VDI queue to *out (not cleared). Default: nothing (single-queue policies).
  virtual void AppendVdiStats(std::vector<VdiStats>* out) const { (void)out; }
  // A block the cache holds already enters the policy (a restart's recovered blocks, the members
  // of a policy rebuilt for a new size): inserted as a write would be, `dirty` or clean, without
  // admission or bypass judging it; room is made as for any insertion (out->evicted), and
  // out->admitted says whether it got in. Default: OnAccess as a write, then MarkClean.
  virtual void Adopt(const Access& access, bool dirty, Outcome* out) {
    OnAccess(access, out);
    if (!dirty) MarkClean(access.key);
  }
  // Empties the policy into *out (appended), each queue's blocks in its eviction order, coldest
  // first, without counting them as evictions: what an online resize's rebuild passes to a new
  // policy (CachePolicy::Adopt). Returns false, taking nothing, if the policy cannot say an
  // order (default).
  virtual bool TakeMembers(std::vector<BlockKey>* out) {
    (void)out;
    return false;
  }
  // Evicts one block as the policy would to make room for a miss, although the cache may not be
  // full, and reports it in out->evicted (out is not reset). Returns false if the policy holds
  // no block or cannot shed one. The cache node calls it when its SSD slots run out before the
  // membership does (an exclusive RAM tier, placement.h).
  virtual bool Shed(Outcome* out) {
    (void)out;
    return false;
  }
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_TYPES_H_
