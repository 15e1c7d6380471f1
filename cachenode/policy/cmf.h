// CmfBypass: the cache-miss-frequency mechanism of paper 003 (Heo et al.,
// docs/papers.md), per VDI.
//
// §II: "If the miss ratio becomes over a preconfigured threshold value [80%], SSD caching is turned
// off [...] when turning off cache, the CMF mechanism stores the time which will be used for
// reactivating caching [...] checks the number of block operations every minute. If the number of
// increased operations is lower than a certain threshold, the CMF mechanism [...] reactivates SSD
// cache again." and "additional values that count [...] all operations and [...] hit case during the
// time period [...] used for calculating the cache miss ratio between checking time terms".
//
// Per VDI: while caching is on, accesses and misses are counted over a window of `window`
// accesses; when a window closes with misses / accesses > `miss_threshold`, caching turns off for
// that VDI (the access closing the window already goes around). While off, misses of that VDI are
// bypassed (reads not cached, writes around); every `check_interval_us` of caller time since it
// turned off, the number of that VDI's accesses in the elapsed interval is compared with
// `reenable_ops` (scaled to the interval if more time passed); fewer turns caching back on with
// fresh counters. Time is Access::now_us: no clock is read.
//
// Thread-safety: not thread-safe; driven by one CacheDriver.
#ifndef RINGCACHE_CACHENODE_POLICY_CMF_H_
#define RINGCACHE_CACHENODE_POLICY_CMF_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "cachenode/policy/bypass.h"

namespace ringcache::policy {

struct CmfConfig {
  double miss_threshold = 0.8;             // paper 003 §II: 80%
  uint64_t window = 1024;                  // accesses per miss-ratio window, per VDI
  uint64_t check_interval_us = 60000000;   // paper 003 §II: every minute
  uint64_t reenable_ops = 1000;            // accesses per interval below which caching resumes
  absl::Status Validate() const;
};

class CmfBypass final : public Bypass {
 public:
  // REQUIRES: config.Validate().ok().
  explicit CmfBypass(const CmfConfig& config) : config_(config) {}

  std::string_view name() const override { return "cmf"; }
  bool Check(const Access& access, bool hit) override;
  size_t MetadataBytes() const override;

  // Returns whether caching is currently off for `vdi`.
  bool IsOff(uint32_t vdi) const;
  // Returns how many times caching was turned off / back on, all VDIs.
  uint64_t turned_off() const { return turned_off_; }
  uint64_t turned_on() const { return turned_on_; }

 private:
  struct VdiState {
    bool off = false;
    uint64_t window_ops = 0;
    uint64_t window_misses = 0;
    uint64_t check_start_us = 0;  // start of the current re-enable interval
    uint64_t check_ops = 0;       // accesses since check_start_us
  };

  CmfConfig config_;
  absl::flat_hash_map<uint32_t, VdiState> vdis_;
  uint64_t turned_off_ = 0;
  uint64_t turned_on_ = 0;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_CMF_H_
