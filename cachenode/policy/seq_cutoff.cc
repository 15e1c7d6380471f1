// SeqCutoffBypass: see seq_cutoff.h.
#include "cachenode/policy/seq_cutoff.h"

namespace ringcache::policy {

absl::Status SeqCutoffConfig::Validate() const {
  if (cutoff_blocks < 1) return absl::InvalidArgumentError("seqcut: cutoff must be >= 1 block");
  if (streams < 1 || streams > 65536) {
    return absl::InvalidArgumentError("seqcut: streams must be in [1, 65536]");
  }
  return absl::OkStatus();
}

SeqCutoffBypass::SeqCutoffBypass(const SeqCutoffConfig& config)
    : config_(config), streams_(config.streams) {
  by_next_.reserve(config.streams);
}

bool SeqCutoffBypass::Check(const Access& access, bool hit) {
  (void)hit;
  ++clock_;
  uint32_t s;
  auto it = by_next_.find(access.key);
  if (it != by_next_.end()) {
    s = it->second;
    by_next_.erase(it);
    ++streams_[s].run;
  } else {
    // A new run replaces the stalest stream (a linear scan over a few dozen entries, only on
    // non-sequential accesses).
    s = 0;
    for (uint32_t i = 1; i < streams_.size(); ++i) {
      if (streams_[i].stamp < streams_[s].stamp) s = i;
    }
    if (streams_[s].run > 0) by_next_.erase(streams_[s].next);
    streams_[s].run = 1;
  }
  Stream& st = streams_[s];
  st.stamp = clock_;
  st.next = BlockKey{access.key.vdi, access.key.block + 1};
  // Another stream may already expect the same block (two runs merged): keep the longer one.
  auto [pos, inserted] = by_next_.try_emplace(st.next, s);
  if (!inserted && pos->second != s) {
    Stream& other = streams_[pos->second];
    if (other.run < st.run) {
      other.run = 0;
      other.stamp = 0;
      pos->second = s;
    } else {
      st.run = 0;
      st.stamp = 0;
    }
  }
  return st.run > config_.cutoff_blocks;
}

size_t SeqCutoffBypass::MetadataBytes() const {
  return sizeof(*this) + streams_.capacity() * sizeof(Stream) +
         by_next_.capacity() * (sizeof(std::pair<BlockKey, uint32_t>) + 1);
}

}  // namespace ringcache::policy
