// SieveAdmission: see sieve.h (paper 002 §III-C).
#include "cachenode/policy/sieve.h"

namespace ringcache::policy {

absl::Status SieveConfig::Validate() const {
  if (threshold < 1 || threshold > 255) {
    return absl::InvalidArgumentError("sieve: threshold must be in [1, 255]");
  }
  if (length >= kNoSlot) return absl::InvalidArgumentError("sieve: len too large");
  return adapt ? climber.Validate() : absl::OkStatus();
}

SieveAdmission::SieveAdmission(const SieveConfig& config)
    : config_(config), lru_(config.length) {}

AdmitClimber& SieveAdmission::ClimberOf(uint32_t vdi) {
  return climbers_.try_emplace(vdi, config_.climber).first->second;
}

void SieveAdmission::OnAccess(const Access& access, bool hit) {
  if (config_.adapt) ClimberOf(access.key.vdi).OnAccess(hit);
}

bool SieveAdmission::Admit(const Access& access) {
  if (config_.threshold <= 1) return true;
  const SlotId e = lru_.Find(access.key);
  if (e == kNoSlot) {
    if (config_.adapt) {
      AdmitClimber& climber = ClimberOf(access.key.vdi);
      // splitmix64 of the draw count: a uniform number in [0, 1), the same in every run.
      uint64_t z = (++draws_) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      if (static_cast<double>(z >> 11) * 0x1.0p-53 < climber.fraction()) {
        climber.OnAdmit();
        return true;  // admitted at its first miss: the sieve need not remember it
      }
    }
    // Miss in the sieve-LRU: remember the access (count 1), send the read to the data node.
    lru_.PushFront(access.key, 1);
    return false;
  }
  const uint32_t count = lru_.tag(e) + 1u;
  if (count >= config_.threshold) {
    // Hit meeting the entrance condition: the block goes into the cache, the sieve forgets it.
    lru_.Erase(e);
    if (config_.adapt) ClimberOf(access.key.vdi).OnAdmit();
    return true;
  }
  lru_.set_tag(e, static_cast<uint8_t>(count));
  lru_.MoveToFront(e);
  return false;
}

size_t SieveAdmission::MetadataBytes() const {
  return sizeof(*this) + lru_.MemoryBytes() +
         climbers_.capacity() * (sizeof(uint32_t) + sizeof(AdmitClimber) + 1);
}

void SieveAdmission::AnnotateVdiStats(absl::Span<VdiStats> rows) const {
  for (VdiStats& row : rows) {
    auto it = climbers_.find(row.vdi);
    if (it != climbers_.end()) row.admit_first = it->second.fraction();
  }
}

uint32_t SieveAdmission::CountForTest(const BlockKey& key) const {
  const SlotId e = lru_.Find(key);
  return e == kNoSlot ? 0 : lru_.tag(e);
}

}  // namespace ringcache::policy
