// Device and cost model. See cost_model.h.
#include "tools/sim/cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "tools/sim/generators.h"

namespace ringcache::sim {

absl::Status CostConfig::Validate() const {
  for (double v : {ssd_read_us, ssd_write_us, hdd_read_us, hdd_write_us}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError("device latencies must be finite and >= 0");
    }
  }
  if (!std::isfinite(hdd_seq_us)) return absl::InvalidArgumentError("hdd_seq_us not finite");
  if (ssd_channels < 1 || ssd_channels > 4096) {
    return absl::InvalidArgumentError("ssd_channels must be in [1, 4096]");
  }
  if (data_nodes < 1 || data_nodes > 1 << 16) {
    return absl::InvalidArgumentError("data_nodes must be in [1, 65536]");
  }
  if (replicas < 1 || replicas > data_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas must be in [1, data_nodes=", data_nodes, "]"));
  }
  if (node_speed.size() > data_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        node_speed.size(), " node speeds given for ", data_nodes, " data nodes"));
  }
  for (double s : node_speed) {
    if (!(s > 0) || !std::isfinite(s)) {
      return absl::InvalidArgumentError("node speed factors must be > 0");
    }
  }
  if (block_size == 0 || object_size < block_size || object_size % block_size != 0) {
    return absl::InvalidArgumentError("object size must be a multiple of the block size");
  }
  return absl::OkStatus();
}

DeviceModel::DeviceModel(const CostConfig& config)
    : cfg_(config), ssd_(config.ssd_channels), nodes_(config.data_nodes),
      node_ops_(config.data_nodes, 0),
      blocks_per_object_(config.object_size / config.block_size) {
  for (size_t i = 0; i < config.node_speed.size(); ++i) nodes_[i].speed = config.node_speed[i];
  if ((blocks_per_object_ & (blocks_per_object_ - 1)) == 0) {
    object_shift_ = __builtin_ctzll(blocks_per_object_);
  }
}

uint32_t DeviceModel::HomeNode(const policy::BlockKey& key) const {
  if (nodes_.size() == 1) return 0;
  uint64_t object = object_shift_ >= 0 ? key.block >> object_shift_ : key.block / blocks_per_object_;
  return static_cast<uint32_t>(Mix64((uint64_t{key.vdi} << 40) ^ object) % nodes_.size());
}

double DeviceModel::HomeLoad(const policy::BlockKey& key) const {
  // Hot in LCR's victim scan (one call per dirty candidate): no division past HomeNode's one.
  const size_t m = nodes_.size();
  if (m == 1) return std::max(0.0, nodes_[0].busy_until - now_us_);
  uint32_t n = HomeNode(key);
  double worst = nodes_[n].busy_until;
  for (uint32_t r = 1; r < cfg_.replicas; ++r) {
    if (++n == m) n = 0;
    worst = std::max(worst, nodes_[n].busy_until);
  }
  return std::max(0.0, worst - now_us_);
}

double DeviceModel::Serve(Server& s, double t, double service) {
  double start = std::max(t, s.busy_until);
  s.busy_until = start + service;
  s.busy_total += service;
  makespan_us_ = std::max(makespan_us_, s.busy_until);
  return s.busy_until;
}

double DeviceModel::Ssd(double t, double service) {
  Server* best = &ssd_[0];
  for (Server& s : ssd_) {
    if (s.busy_until < best->busy_until) best = &s;
  }
  serial_us_ += service;
  return Serve(*best, t, service);
}

double DeviceModel::HddCost(Server& s, const policy::BlockKey& key, double base) const {
  double cost = base;
  if (cfg_.hdd_seq_us >= 0 && key.vdi == s.last_vdi && key.block == s.last_block + 1) {
    cost = cfg_.hdd_seq_us;
  }
  return cost * s.speed;
}

double DeviceModel::HddRead(const policy::BlockKey& key, double t) {
  uint32_t n = HomeNode(key);
  uint32_t pick = n;
  for (uint32_t r = 1; r < cfg_.replicas; ++r) {
    if (++n == nodes_.size()) n = 0;
    if (nodes_[n].busy_until < nodes_[pick].busy_until) pick = n;
  }
  Server& s = nodes_[pick];
  double cost = HddCost(s, key, cfg_.hdd_read_us);
  s.last_vdi = key.vdi;
  s.last_block = key.block;
  ++node_ops_[pick];
  serial_us_ += cost;
  return Serve(s, t, cost);
}

double DeviceModel::HddWrite(const policy::BlockKey& key, double t) {
  uint32_t n = HomeNode(key);
  double done = t;
  double max_cost = 0;
  for (uint32_t r = 0; r < cfg_.replicas; ++r, n = n + 1 == nodes_.size() ? 0 : n + 1) {
    Server& s = nodes_[n];
    double cost = HddCost(s, key, cfg_.hdd_write_us);
    s.last_vdi = key.vdi;
    s.last_block = key.block;
    ++node_ops_[n];
    max_cost = std::max(max_cost, cost);
    done = std::max(done, Serve(s, t, cost));
  }
  serial_us_ += max_cost;
  return done;
}

std::vector<double> DeviceModel::node_busy_us() const {
  std::vector<double> out;
  for (const Server& s : nodes_) out.push_back(s.busy_total);
  return out;
}

double DeviceModel::ssd_busy_us() const {
  double total = 0;
  for (const Server& s : ssd_) total += s.busy_total;
  return total;
}

}  // namespace ringcache::sim
