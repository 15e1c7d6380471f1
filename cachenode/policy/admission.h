// Admission: decides whether a missed block enters the cache, and optionally which cached block it
// may replace (a replacement veto, for RPAC). Shaped like CacheLib's AdmissionPolicy: a handful of
// methods over keys and opaque slot ids.
//
// Protocol, per access, as the CacheDriver calls it:
//   OnAccess(access, hit)                     every access (popularity counters, ...)
//   Admit(access)                             a read miss (and a write miss if judges_writes())
//                                             that no bypass sent around the cache
//   ChooseReplacement(key, candidates, slots) only when the cache is full and the insertion needs
//                                             a victim; only if replacement_window() > 0
// Writes are cached in write-back whatever the admission says unless judges_writes() is true.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_ADMISSION_H_
#define RINGCACHE_CACHENODE_POLICY_ADMISSION_H_

#include <cstddef>
#include <string_view>

#include "absl/types/span.h"
#include "cachenode/policy/slot_table.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

class Admission {
 public:
  virtual ~Admission() = default;

  virtual std::string_view name() const = 0;
  // Observes one access; `hit` says whether its block is cached. Default: nothing.
  virtual void OnAccess(const Access& access, bool hit) {
    (void)access;
    (void)hit;
  }
  // Returns true if the missed block of `access` may be inserted.
  virtual bool Admit(const Access& access) = 0;
  // A block left the cache (evicted to make room). Default: nothing.
  virtual void OnEvicted(const BlockKey& key) { (void)key; }
  // Returns whether write misses are judged too (false: writes are always cached).
  virtual bool judges_writes() const { return false; }

  // Returns how many eviction candidates ChooseReplacement wants to see; 0 if it does not judge
  // replacements (then the driver's victim chooser picks).
  virtual size_t replacement_window() const { return 0; }
  // Returns the index in `candidates` (tail first) of the block that `incoming` replaces, or -1
  // to refuse the replacement (the missed block is then not cached). REQUIRES: !candidates.empty().
  virtual int ChooseReplacement(const BlockKey& incoming, absl::Span<const SlotId> candidates,
                                const SlotTable& slots) {
    (void)incoming;
    (void)candidates;
    (void)slots;
    return 0;
  }

  // Returns the bytes of metadata this admission holds.
  virtual size_t MetadataBytes() const = 0;
  // Adds the admission's per-VDI state to `rows` (VdiStats::admit_first). Default: nothing.
  virtual void AnnotateVdiStats(absl::Span<VdiStats> rows) const { (void)rows; }
};

// Admits everything: the baseline.
class AlwaysAdmit final : public Admission {
 public:
  std::string_view name() const override { return "always"; }
  bool Admit(const Access& access) override {
    (void)access;
    return true;
  }
  size_t MetadataBytes() const override { return 0; }
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_ADMISSION_H_
