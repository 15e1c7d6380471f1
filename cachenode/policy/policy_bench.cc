// policy_bench: accesses per second and metadata bytes per cached block of registry policies on one
// core, next to an anchor (the trace generator alone) measured in the same run.
//
//   policy_bench [hot|zipf] [accesses=10000000] [capacity_blocks=1048576] [spec ...]
//
// The trace is generated on the fly (no trace memory) over 4x the cache's blocks, 30% writes,
// 8 VDIs with rates 1/2, 1/4, ...: "hot" sends 70% of accesses uniformly to a hot set of half the
// cache and the rest uniformly everywhere (little locality: the structures' cache misses show);
// "zipf" draws ranks from Zipf(1) (approximately, k = N^u). Times are CPU time of the process.
// After each policy's run, the policy work of an online resize (cachenode BlockMap::
// ReplacePolicy): its members taken in eviction order and adopted by a policy of half the
// capacity. Not a test: prints numbers, asserts nothing.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cachenode/policy/registry.h"
#include "cachenode/policy/types.h"

namespace {

using ringcache::policy::Access;
using ringcache::policy::BlockKey;
using ringcache::policy::CachePolicy;
using ringcache::policy::Op;
using ringcache::policy::Outcome;
using ringcache::policy::Tier;

class Gen {
 public:
  Gen(uint64_t capacity, bool zipf) : cap_(capacity), zipf_(zipf), log_n_(std::log(4.0 * capacity)) {}
  void Next(Access* a) {
    const uint64_t r = Rand();
    const uint64_t hot = cap_ / 2 + 1, all = cap_ * 4;
    uint64_t block;
    if (zipf_) {
      const double u = double(r >> 11) * 0x1.0p-53;
      block = static_cast<uint64_t>(std::exp(u * log_n_)) - 1;
    } else {
      block = (r % 10 < 7) ? (r >> 8) % hot : (r >> 8) % all;
    }
    // VDI rates 1/2, 1/4, 1/8, ... (skewed), derived from the block so a block keeps its VDI.
    const uint64_t h = (block >> 6) * 0x9E3779B97F4A7C15ull;  // runs of 64 blocks share a VDI
    const uint32_t vdi = std::min<uint32_t>(7, static_cast<uint32_t>(__builtin_clzll(h | 1)));
    a->key = BlockKey{vdi, block};
    a->op = ((r >> 4) % 10 < 3) ? Op::kWrite : Op::kRead;
    a->now_us += 10;
    ++a->seq;
  }

 private:
  uint64_t Rand() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  uint64_t cap_;
  bool zipf_;
  double log_n_;
  uint64_t s_ = 0x2545F4914F6CDD1Dull;
};

// CPU time of this process: steadier than wall time on a shared machine.
double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const bool zipf = argc > 1 && std::string(argv[1]) == "zipf";
  const uint64_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10000000;
  const uint64_t cap = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1048576;
  std::vector<std::string> specs;
  for (int i = 4; i < argc; ++i) specs.emplace_back(argv[i]);
  if (specs.empty()) specs = ringcache::policy::KnownPolicies();

  {
    Gen g(cap, zipf);
    Access a;
    uint64_t sink = 0;
    const double t0 = CpuNow();
    for (uint64_t i = 0; i < n; ++i) {
      g.Next(&a);
      sink += a.key.block;
    }
    const double s = CpuNow() - t0;
    std::printf("%-24s %12.0f accesses/s (CPU)  (anchor: generator only; sink %llu)\n", "anchor", n / s,
                static_cast<unsigned long long>(sink & 1));
  }
  for (const std::string& spec : specs) {
    ringcache::policy::PolicyContext ctx;
    ctx.capacity_blocks = cap;
    ctx.ram_blocks = cap / 8;
    auto p = ringcache::policy::MakePolicy(spec, ctx);
    if (!p.ok()) {
      std::fprintf(stderr, "%s: %s\n", spec.c_str(), std::string(p.status().message()).c_str());
      continue;
    }
    CachePolicy& policy = **p;
    Gen g(cap, zipf);
    Access a;
    Outcome out;
    uint64_t hits = 0;
    const double t0 = CpuNow();
    for (uint64_t i = 0; i < n; ++i) {
      g.Next(&a);
      policy.OnAccess(a, &out);
      hits += out.hit != Tier::kNone;
    }
    const double s = CpuNow() - t0;
    const double bytes = double(policy.MetadataBytes());
    std::printf(
        "%-24s %12.0f accesses/s (CPU)  hit %.3f  metadata %6.1f B/cached block, %6.1f B/capacity "
        "block (%zu cached)\n",
        spec.c_str(), n / s, double(hits) / n, bytes / double(policy.size() ? policy.size() : 1),
        bytes / double(policy.capacity()), policy.size());

    ctx.capacity_blocks = cap / 2;
    auto half = ringcache::policy::MakePolicy(spec, ctx);
    if (!half.ok()) continue;
    const size_t members = policy.size();
    std::vector<BlockKey> order;
    order.reserve(members);
    const double r0 = CpuNow();
    out.Reset();
    policy.TakeMembers(&order);
    const double shed = CpuNow() - r0;
    for (const BlockKey& key : order) {
      a.key = key;
      ++a.seq;
      (*half)->Adopt(a, false, &out);
    }
    const double r = CpuNow() - r0;
    if (order.empty()) {
      std::printf("%-24s   resize rebuild: says no order (its blocks go over in none)\n", "");
    } else {
      std::printf(
          "%-24s   resize rebuild to half: %zu blocks in %.0f ms CPU (%.0f ms per million; "
          "taking them %.0f ms)\n",
          "", order.size(), r * 1e3, r * 1e9 / double(order.size()), shed * 1e3);
    }
  }
  return 0;
}
