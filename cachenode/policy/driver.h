// CacheDriver: the one driver every single-tier policy runs through, as libCacheSim's
// cache_get_base: find -> bypass check -> admit -> evict until room -> insert.
//
// It owns the SlotTable (one slot per block: key, links, dirty bit) and composes small parts:
//   Space          how blocks are shared among queues and which queue gives up a block
//                  (GlobalSpace, VbqSpace); it owns the queues' Orders (LRU, FIFO, ARC, ...)
//   Admission      whether a miss is inserted (always, sieve-LRU) and, optionally, which
//                  candidate it may replace (RPAC)
//   Bypass*        accesses that go around the cache on a miss (CMF, sequential cutoff)
//   VictimChooser  which of a queue's tail candidates is evicted (tail, LCR)
//
// One access (OnAccess):
//   1. q = space.OnAccess(vdi); slot = find(key); admission.OnAccess; every bypass.Check.
//   2. Hit: the queue's order is touched; a write makes the block dirty (one SSD write).
//   3. Miss: if a bypass fired -> bypassed (read from / write to the data node, nothing cached).
//      A read miss (a write miss too if admission.judges_writes()) the admission refuses ->
//      rejected. Otherwise order.OnMiss, room is made (reclaim rounds of the space; with a
//      replacement-judging admission the judge picks among its window of candidates and may
//      refuse, which rejects the miss), and the block is inserted, dirty if a write.
//   Every eviction is reported in Outcome::evicted; a dirty one costs a write home.
//
// Per-VDI rules (SetVdiRules): one VDI may run its own order, admission, bypasses and victim
// chooser inside the node's space (a VBQ queue per VDI); the others keep the driver's. A switch
// moves the VDI's cached blocks into the new order with their dirty bits: nothing is dropped.
//
// Invariants:
//   1. size() == number of used slots == sum of the queues' sizes <= capacity().
//   2. dirty_count() == number of used slots whose dirty bit is set.
//   3. A block evicted during an access is never the block of that access.
//
// Thread-safety: not thread-safe (CachePolicy's contract: the caller serialises calls).
#ifndef RINGCACHE_CACHENODE_POLICY_DRIVER_H_
#define RINGCACHE_CACHENODE_POLICY_DRIVER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachenode/policy/admission.h"
#include "cachenode/policy/bypass.h"
#include "cachenode/policy/slot_table.h"
#include "cachenode/policy/space.h"
#include "cachenode/policy/types.h"
#include "cachenode/policy/victim.h"

namespace ringcache::policy {

struct DriverConfig {
  std::string name;  // what name() reports, e.g. the registry spec
  size_t capacity_blocks = 0;
  absl::Status Validate() const;
};

// The parts a driver is composed of. `make_space` builds the space over the driver's SlotTable
// (which it must not outlive). Null admission means AlwaysAdmit; null victim means TailVictim.
struct DriverParts {
  std::function<std::unique_ptr<Space>(SlotTable* slots)> make_space;
  std::unique_ptr<Admission> admission;
  std::vector<std::unique_ptr<Bypass>> bypasses;
  std::unique_ptr<VictimChooser> victim;
};

// A VDI's own parts (see SetVdiRules). A null order keeps the space's; null admission means
// AlwaysAdmit; null victim means TailVictim.
struct VdiRules {
  std::string spec;  // what VdiSpec reports
  OrderFactory order;
  std::unique_ptr<Admission> admission;
  std::vector<std::unique_ptr<Bypass>> bypasses;
  std::unique_ptr<VictimChooser> victim;
};

class CacheDriver final : public CachePolicy {
 public:
  // Returns a driver, or kInvalidArgument if the config is invalid or make_space is missing.
  static absl::StatusOr<std::unique_ptr<CacheDriver>> Create(const DriverConfig& config,
                                                             DriverParts parts);
  CacheDriver(const CacheDriver&) = delete;
  CacheDriver& operator=(const CacheDriver&) = delete;

  std::string_view name() const override { return name_; }
  void OnAccess(const Access& access, Outcome* out) override;
  bool MarkClean(const BlockKey& key) override;
  void Adopt(const Access& access, bool dirty, Outcome* out) override;
  bool TakeMembers(std::vector<BlockKey>* out) override;
  bool Erase(const BlockKey& key) override;
  Tier Lookup(const BlockKey& key) const override;
  size_t size() const override { return slots_.used(); }
  size_t capacity() const override { return slots_.capacity(); }
  size_t dirty_count() const override { return dirty_; }
  size_t MetadataBytes() const override;
  void AppendVdiStats(std::vector<VdiStats>* out) const override;
  // Evicts one block of the space's shed queue (VBQ: the queue furthest above its share).
  bool Shed(Outcome* out) override;

  // Gives `vdi` its own rules; null returns it to the driver's. The VDI's blocks move into the
  // new order (FailedPrecondition if the space has no per-VDI queues); admission, bypass and
  // victim state starts fresh. Admissions that judge replacements (RPAC) are refused.
  absl::Status SetVdiRules(uint32_t vdi, std::unique_ptr<VdiRules> rules);
  // Gives `vdi` a minimum and maximum share of the cache (Space::SetShare; 0 and 1: none).
  absl::Status SetVdiShare(uint32_t vdi, double min, double max) {
    return space_->SetShare(vdi, min, max);
  }
  // The spec `vdi` runs under, or "" for the driver's own.
  std::string_view VdiSpec(uint32_t vdi) const;

  // The composed parts, for tests and metrics.
  const Space& space() const { return *space_; }
  Space& mutable_space() { return *space_; }
  const Admission& admission() const { return *admission_; }
  const VictimChooser& victim() const { return *victim_; }

 private:
  enum class EvictResult { kEvicted, kEmpty, kRefused };
  // The admission, bypasses and victim that apply to one VDI.
  struct Rules {
    Admission* admission;
    const std::vector<std::unique_ptr<Bypass>>* bypasses;
    VictimChooser* victim;
  };
  Rules RulesOf(uint32_t vdi);
  void SizeCandidates(const Admission& a, const VictimChooser& v);

  CacheDriver(const DriverConfig& config, DriverParts parts);
  // Makes room for one block of `incoming`; returns false if the replacement judge refused.
  bool MakeRoom(const BlockKey& incoming, bool judged, Outcome* out);
  // Evicts one block of queue `q`. With `judged`, the admission's replacement rule picks.
  EvictResult EvictOne(uint32_t q, const BlockKey& incoming, bool judged, Outcome* out);

  std::string name_;
  SlotTable slots_;
  std::unique_ptr<Space> space_;
  std::unique_ptr<Admission> admission_;
  std::vector<std::unique_ptr<Bypass>> bypasses_;
  std::unique_ptr<VictimChooser> victim_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<VdiRules>> vdi_rules_;
  size_t capacity_;
  size_t dirty_ = 0;
  std::vector<SlotId> candidates_;  // scratch, sized once to the largest window
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_DRIVER_H_
