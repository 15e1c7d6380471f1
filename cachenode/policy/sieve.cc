// SieveAdmission: see sieve.h (paper 002 §III-C).
#include "cachenode/policy/sieve.h"

namespace ringcache::policy {

absl::Status SieveConfig::Validate() const {
  if (threshold < 1 || threshold > 255) {
    return absl::InvalidArgumentError("sieve: threshold must be in [1, 255]");
  }
  if (length >= kNoSlot) return absl::InvalidArgumentError("sieve: len too large");
  return absl::OkStatus();
}

SieveAdmission::SieveAdmission(const SieveConfig& config)
    : config_(config), lru_(config.length) {}

bool SieveAdmission::Admit(const Access& access) {
  if (config_.threshold <= 1) return true;
  const SlotId e = lru_.Find(access.key);
  if (e == kNoSlot) {
    // Miss in the sieve-LRU: remember the access (count 1), send the read to the data node.
    lru_.PushFront(access.key, 1);
    return false;
  }
  const uint32_t count = lru_.tag(e) + 1u;
  if (count >= config_.threshold) {
    // Hit meeting the entrance condition: the block goes into the cache, the sieve forgets it.
    lru_.Erase(e);
    return true;
  }
  lru_.set_tag(e, static_cast<uint8_t>(count));
  lru_.MoveToFront(e);
  return false;
}

uint32_t SieveAdmission::CountForTest(const BlockKey& key) const {
  const SlotId e = lru_.Find(key);
  return e == kNoSlot ? 0 : lru_.tag(e);
}

}  // namespace ringcache::policy
