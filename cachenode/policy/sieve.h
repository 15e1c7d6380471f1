// SieveAdmission: sieve-LRU admission of paper 002 (CircularCache, docs/papers.md) §III-C.
//
// "We use a sieve-LRU queue to filter the cold data, the length of this queue is fixed and the
// sieve-LRU only store the metadata of requested data. [...] For hits in sieve-LRU, if they meet
// the condition of entrance into VBQ, the requested data is written into SSD-cache. Otherwise, the
// request will be sent to corresponding data nodes. For misses in sieve-LRU, the access metadata
// will be written into sieve-LRU."
//
// Each read miss counts one access of its key in a fixed-length LRU of keys (no data). The block is
// admitted by the read miss at which its count reaches `threshold` (count includes this access:
// threshold 1 admits everything, 2 admits the second read miss within the sieve's memory); its
// sieve entry is then dropped. Writes are not judged (write-back caches every write).
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_SIEVE_H_
#define RINGCACHE_CACHENODE_POLICY_SIEVE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "cachenode/policy/admission.h"
#include "cachenode/policy/key_lru.h"

namespace ringcache::policy {

struct SieveConfig {
  uint32_t threshold = 2;  // read misses of a key (counting the admitting one) needed to admit
  size_t length = 0;       // keys the sieve-LRU remembers; 0 = a quarter of the cache (README)
  absl::Status Validate() const;
};

class SieveAdmission final : public Admission {
 public:
  // REQUIRES: config.Validate().ok() and config.length > 0.
  explicit SieveAdmission(const SieveConfig& config);

  std::string_view name() const override { return "sieve"; }
  bool Admit(const Access& access) override;
  size_t MetadataBytes() const override { return sizeof(*this) + lru_.MemoryBytes(); }

  // Returns the count the sieve holds for `key` (0 if not remembered).
  uint32_t CountForTest(const BlockKey& key) const;
  size_t size() const { return lru_.size(); }

 private:
  SieveConfig config_;
  KeyLru lru_;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_SIEVE_H_
