// While `ringcachectl node remove` (or `node drain`) runs, the admin service shows how far the
// node's dirty data has got: a thread samples the node's dirty bytes once a second and reports
// them, until the removal ends (AdminService::RemoveNode).
#ifndef RINGCACHE_GATEWAY_DRAIN_WATCH_H_
#define RINGCACHE_GATEWAY_DRAIN_WATCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "ringcache/v1/cachenode.pb.h"

namespace ringcache::gateway {

class DrainWatch {
 public:
  // The node's cheap answer within a timeout, never waiting for a node that is not there.
  using Probe = std::function<absl::Status(int timeout_ms)>;
  // Its per-VDI stats; may wait for a restarting node (the cache client's wait-for-ready call).
  using Stats = std::function<absl::Status(std::vector<v1::VdiCacheStats>*)>;
  // What to show: a phrase, the dirty bytes at the start (the most seen) and those left.
  using Report = std::function<void(const std::string& progress, uint64_t start, uint64_t left)>;

  // Null probe and stats: the node is not a member (nothing to sample; reported as replaying).
  DrainWatch(Probe probe, Stats stats, Report report);
  ~DrainWatch();
  // Ends the sampling; returns within the probe's timeout (a removal's answer waits for it).
  void Stop();

  // How long a sample waits for the node's probe.
  static constexpr int kProbeTimeoutMs = 500;

 private:
  void Run();

  const Probe probe_;
  const Stats stats_;
  const Report report_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_DRAIN_WATCH_H_
