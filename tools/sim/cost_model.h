// ringcache-sim's cost model: device latencies, the serial virtual time of paper 001, and a
// queueing model of the SSD and the M data nodes that also serves as the LoadView for LCR.
//
// Serial virtual time (paper 001 §IV-A, "VirtualTime" formula):
//   |SSD read hits| × T_SSDR + |SSD writes| × T_SSDW + |read misses| × T_HDD + |flushes| × T_HDD
// with Table I's defaults T_SSDR = 25 µs, T_SSDW = 200 µs, T_HDD = 5 ms; RAM hits are free. Here
// every operation adds the service time of the device that served it, so with the defaults
// (one replica, node speed 1, no sequential discount) serial_us() is exactly that formula.
//
// Queueing model: each device is a FIFO server (busy_until). An operation issued at time t on a
// server starts at max(t, busy_until) and ends service_time later. The SSD has `ssd_channels`
// servers (an op takes the earliest free). Data nodes: node j's service times are multiplied by
// speed[j] (> 1 = slower: the skew of paper 004). An object's home nodes are R consecutive nodes
// starting at Mix64(vdi << 40 ^ object) mod M, object = block * block_size / object_size (the
// stand-in for the data ring, docs/design.md §3). Reads go to the least-loaded home node; writes
// (destage of a dirty victim, write-around) to all R, finishing when the last one does.
// Optional sequential discount: an HDD op on a node whose previous op was the preceding block of
// the same VDI costs hdd_seq_us instead (HDD streaming; paper 003 measured 8 GB in 59 s, about
// 29 µs per 4 KiB).
//
// Load (paper 004 eq. 2: L_chip = N_R·T_read + N_W·T_write, the queued work): HomeLoad(key) is
// max(0, busy_until - now) of the key's most loaded home node, in µs: destaging a dirty block
// writes all R homes and finishes with the last (LCR's cost of evicting it).
//
// Thread-safety: not thread-safe; one runner drives one model.
#ifndef RINGCACHE_TOOLS_SIM_COST_MODEL_H_
#define RINGCACHE_TOOLS_SIM_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cachenode/policy/types.h"

namespace ringcache::sim {

struct CostConfig {
  double ssd_read_us = 25;     // paper 001 Table I
  double ssd_write_us = 200;   // paper 001 Table I
  double hdd_read_us = 5000;   // paper 001 Table I
  double hdd_write_us = 5000;  // paper 001 Table I
  double hdd_seq_us = -1;      // < 0: no sequential discount
  uint32_t ssd_channels = 1;
  uint32_t data_nodes = 1;
  uint32_t replicas = 1;
  std::vector<double> node_speed;  // service-time multiplier per node; missing entries are 1
  uint32_t block_size = 4096;
  uint64_t object_size = uint64_t{4} << 20;

  absl::Status Validate() const;
};

class DeviceModel : public policy::LoadView {
 public:
  // REQUIRES: config.Validate().ok().
  explicit DeviceModel(const CostConfig& config);

  // Sets the time HomeLoad() measures backlog against (the current request's arrival).
  void SetNow(double now_us) { now_us_ = now_us; }
  double HomeLoad(const policy::BlockKey& key) const override;

  // Each issues one operation at time `t` (µs) and returns its completion time.
  double SsdRead(double t) { return Ssd(t, cfg_.ssd_read_us); }
  double SsdWrite(double t) { return Ssd(t, cfg_.ssd_write_us); }
  double HddRead(const policy::BlockKey& key, double t);
  double HddWrite(const policy::BlockKey& key, double t);

  // Returns the home node of `key`'s object (replica 0).
  uint32_t HomeNode(const policy::BlockKey& key) const;

  double serial_us() const { return serial_us_; }      // Σ service times (paper 001)
  double makespan_us() const { return makespan_us_; }  // latest completion so far
  // Per data node: operations served and busy time.
  const std::vector<uint64_t>& node_ops() const { return node_ops_; }
  std::vector<double> node_busy_us() const;
  double ssd_busy_us() const;

 private:
  struct Server {
    double busy_until = 0;
    double busy_total = 0;
    double speed = 1;
    uint32_t last_vdi = ~0u;
    uint64_t last_block = ~uint64_t{0};
  };
  double Ssd(double t, double service);
  double Serve(Server& s, double t, double service);
  double HddCost(Server& s, const policy::BlockKey& key, double base) const;

  CostConfig cfg_;
  std::vector<Server> ssd_;
  std::vector<Server> nodes_;
  std::vector<uint64_t> node_ops_;
  uint64_t blocks_per_object_;
  int object_shift_ = -1;  // log2(blocks_per_object_) when it is a power of two
  double now_us_ = 0;
  double serial_us_ = 0;
  double makespan_us_ = 0;
};

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_COST_MODEL_H_
