// ringcache-control-scale: the control plane's cost as the cluster grows (issue 31, "Scale").
// For clusters of 10, 100 and 1,000 cache nodes (4, 20, 200 data nodes; 1,000, 10,000, 100,000
// VDIs) it runs cache ring transitions — a removal and a join of a random node, through the real
// transition core (coordinator/ring_change.h) — and prints per transition: the core's time, the
// time a follower takes to decode the published state and build its ring, the bytes written to
// etcd, the watchers that receive them and the bytes delivered (gateways take the whole ring,
// cache nodes its epoch alone), the share of objects that move,
// and the calls a join makes per VDI. Nothing in it may grow worse than linearly with the
// cluster. Usage: ringcache-control-scale [--transitions N] [--gateways G].
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/ring_change.h"
#include "datanode/client/datanode_pool.h"
#include "ring/ring.h"

namespace {

using ringcache::coordinator::CacheRingState;
using ringcache::coordinator::RingChange;
using ringcache::coordinator::Step;
using Clock = std::chrono::steady_clock;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

std::vector<uint32_t> InRing(const CacheRingState& s, const std::vector<uint32_t>& ids) {
  std::vector<uint32_t> out;
  for (uint32_t id : ids) {
    if (std::find(s.removed.begin(), s.removed.end(), id) == s.removed.end()) out.push_back(id);
  }
  return out;
}

ringcache::ring::Ring Build(const std::vector<uint32_t>& members) {
  std::vector<ringcache::ring::Member> m;
  for (uint32_t id : members) m.push_back({id, 1.0, ""});
  return *ringcache::ring::Ring::BuildCacheRing(std::move(m));
}

// Drives `c` to its end as an executor whose every step succeeds; returns the outcome.
CacheRingState Drive(RingChange* c, const CacheRingState& now) {
  CacheRingState out;
  for (Step s = c->next(); s.kind != Step::kDone; s = c->next()) {
    if (s.kind == Step::kPublishOutcome) out = c->Outcome(now);
    c->Report(absl::OkStatus());
  }
  return out;
}

struct Row {
  int cache_nodes, data_nodes, vdis;
  double core_us = 0, follow_us = 0;
  size_t etcd_bytes = 0, data_ring_bytes = 0;
  size_t watchers = 0, delivered = 0;
  double moved = 0;
};

Row Measure(int n, int d, int v, int gateways, int transitions, std::mt19937_64& rng) {
  Row row{n, d, v};
  CacheRingState st;
  st.epoch = 1;
  std::vector<uint32_t> ids;
  for (int i = 1; i <= n; ++i) {
    ids.push_back(static_cast<uint32_t>(i));
    st.learned.push_back(
        {static_cast<uint32_t>(i), absl::StrCat("10.", i / 250, ".", i % 250, ".7:7300"), 1.0});
  }
  ringcache::datanode::DataRing dr;
  dr.epoch = 1;
  for (int j = 1; j <= d; ++j) {
    dr.nodes.push_back({static_cast<uint32_t>(j), absl::StrCat("10.9.", j, ".1:7400"), 1.0, ""});
    dr.members.push_back(static_cast<uint32_t>(j));
  }
  row.data_ring_bytes = ringcache::datanode::EncodeDataRing(dr).size();
  double core = 0, follow = 0, moved = 0;
  size_t bytes = 0, epoch_bytes = 0;
  for (int t = 0; t < transitions; ++t) {
    const std::vector<uint32_t> in = InRing(st, ids);
    const uint32_t node = in[rng() % in.size()];
    const ringcache::ring::Ring before = Build(in);
    for (RingChange::Kind kind : {RingChange::Kind::kRemoval, RingChange::Kind::kJoin}) {
      auto start = Clock::now();
      auto c = RingChange::Begin(kind, st, ids, node, 5, absl::Seconds(1));
      CacheRingState out = Drive(&*c, c->start());
      core += Us(Clock::now() - start);
      // Each publish writes the ring and its epoch (membership::CacheRingPuts).
      const std::string a = ringcache::membership::EncodeCacheRingState(c->start());
      const std::string b = ringcache::membership::EncodeCacheRingState(out);
      bytes += a.size() + b.size();
      epoch_bytes += ringcache::membership::EncodeRingEpoch(c->start().epoch).size() +
                     ringcache::membership::EncodeRingEpoch(out.epoch).size();
      // What each follower does with a published state: decode it and build the ring.
      start = Clock::now();
      auto decoded = ringcache::membership::DecodeCacheRingState(b);
      const ringcache::ring::Ring after = Build(InRing(*decoded, ids));
      follow += Us(Clock::now() - start);
      if (kind == RingChange::Kind::kRemoval) {
        int m = 0;
        constexpr int kSample = 20000;
        for (int o = 0; o < kSample; ++o) {
          const ringcache::ring::ObjectKey key{static_cast<uint32_t>(o % 97 + 1),
                                               static_cast<uint64_t>(o)};
          m += before.Owner(key) != after.Owner(key);
        }
        moved += static_cast<double>(m) / kSample;
      }
      st = out;
    }
  }
  const int changes = 2 * transitions;
  row.core_us = core / changes;
  row.follow_us = follow / changes;
  row.etcd_bytes = (bytes + epoch_bytes) / changes;
  // Gateways watch the whole ring (they route on it); cache nodes watch its epoch alone
  // (cachenode/ring_follower.h).
  row.watchers = static_cast<size_t>(gateways + n);
  row.delivered = static_cast<size_t>(gateways) * (bytes + epoch_bytes) / changes +
                  static_cast<size_t>(n) * epoch_bytes / changes;
  row.moved = moved / transitions;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The control plane's cost per cache ring transition as the cluster grows: 10, "
      "100 and 1,000 cache nodes, through the real transition core."};
  int transitions = 20, gateways = 3;
  app.add_option("--transitions", transitions, "removal+join pairs per cluster size")
      ->capture_default_str();
  app.add_option("--gateways", gateways, "gateways watching the rings")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::mt19937_64 rng(42);
  std::printf(
      "| cache nodes | data nodes | VDIs | core us/transition | follower us (decode + "
      "ring) | etcd bytes/transition | data ring bytes | watchers | bytes delivered | "
      "objects moved | RegisterVdi calls per join |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  const int sizes[3][3] = {{10, 4, 1000}, {100, 20, 10000}, {1000, 200, 100000}};
  for (const auto& s : sizes) {
    const Row r = Measure(s[0], s[1], s[2], gateways, transitions, rng);
    std::printf(
        "| %d | %d | %d | %.1f | %.0f | %zu | %zu | %zu | %zu | %.2f%% (1/n = %.2f%%) | "
        "%d |\n",
        r.cache_nodes, r.data_nodes, r.vdis, r.core_us, r.follow_us, r.etcd_bytes,
        r.data_ring_bytes, r.watchers, r.delivered, 100 * r.moved, 100.0 / r.cache_nodes, r.vdis);
  }
  return 0;
}
