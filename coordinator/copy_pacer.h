// Pace of the data rebalancer's copies (a join, an out node's replicas made again, a refill):
// full speed while the data nodes serve no client, a lower one while they do. A copy's cost to
// the clients is its bursts (a page scanned, sent, written, then flushed and compacted) on the
// CPUs the clients' reads wait for, so while clients are served the copies make fewer of them
// (docs/rebalancing.md, "What a recovery costs the clients"). The data nodes count the client
// requests they served (StatsResponse.client_ops); the pacer samples that count at most every
// `sample` and calls the nodes busy while it grew.
#ifndef RINGCACHE_GATEWAY_COPY_PACER_H_
#define RINGCACHE_GATEWAY_COPY_PACER_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/time/time.h"

namespace ringcache::coordinator {

class CopyPacer {
 public:
  struct Options {
    double idle_mb_s = 64;  // 0: unthrottled
    double busy_mb_s = 16;  // 0: the idle rate also while clients are served
    absl::Duration sample = absl::Milliseconds(500);
    // How far behind its pace a copy may fall and catch up: the time each copy call itself takes
    // (scan, send, write) is paid from it, so the rate is held; a longer stall (a slow source)
    // earns no more than this as a burst.
    absl::Duration slack = absl::Milliseconds(20);
  };
  // `client_ops` returns the data nodes' client request count (summed; nullopt: unknown, taken
  // as busy).
  CopyPacer(Options options, std::function<std::optional<uint64_t>()> client_ops)
      : options_(options), client_ops_(std::move(client_ops)) {}

  // `bytes` more were copied at `now`: how long to wait before the next copy.
  absl::Duration After(uint64_t bytes, absl::Time now);
  // The limit in force (bytes/s; 0: none) and whether the data nodes were serving clients at
  // the last sample.
  double limit_bytes_per_s() const;
  bool busy() const { return busy_; }

 private:
  void Sample(absl::Time now);

  const Options options_;
  const std::function<std::optional<uint64_t>()> client_ops_;
  absl::Time next_free_ = absl::InfinitePast();  // when the bytes copied so far are paid for
  absl::Time next_sample_ = absl::InfinitePast();
  std::optional<uint64_t> last_ops_;
  bool busy_ = false;
};

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_GATEWAY_COPY_PACER_H_
