// ring_bench: lookup throughput of ring/ (Google Benchmark). The headline is BM_Owners3/100: the 3
// distinct owners of an object over 100 nodes (hash of the object key included), reported as
// lookups/s on one core. Anchors measured in the same run: the object-key hash alone, and the
// classic one-probe ring. Counters also give the ring's metadata size in bytes.
//
//   ring_bench --benchmark_filter=Owners3
//
// Single-threaded benchmark; the Ring under test is built once per benchmark and only read.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "ring/hash.h"
#include "ring/ring.h"

namespace ringcache::ring {
namespace {

Ring BuildRing(int nodes, int probes, int cached_owners = 3) {
  RingConfig config;
  config.cached_owners = cached_owners;
  for (int i = 0; i < nodes; ++i)
    config.members.push_back(Member{static_cast<NodeId>(i + 1), 1.0, ""});
  config.probes = probes;
  return Ring::Build(config).value();
}

void SetRingCounters(benchmark::State& state, const Ring& ring) {
  state.counters["lookups/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["metadata_bytes"] = static_cast<double>(ring.MemoryBytes());
  state.counters["segments"] = static_cast<double>(ring.num_segments());
}

// Anchor: the object-key hash alone.
void BM_HashObjectKey(benchmark::State& state) {
  uint64_t index = 0;
  for (auto _ : state) benchmark::DoNotOptimize(HashObjectKey(5, index++));
  state.counters["hashes/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_HashObjectKey);

// Headline: hash an object key, then fill its 3 distinct owners.
void BM_Owners3(benchmark::State& state) {
  const Ring ring = BuildRing(static_cast<int>(state.range(0)), RingConfig().probes);
  NodeId owners[3];
  uint64_t index = 0;
  for (auto _ : state) {
    const absl::Status s = ring.FillOwners(HashObjectKey(5, index++), absl::MakeSpan(owners));
    benchmark::DoNotOptimize(s.ok());
    benchmark::DoNotOptimize(owners);
  }
  SetRingCounters(state, ring);
}
BENCHMARK(BM_Owners3)->Arg(10)->Arg(100)->Arg(1000);

// Anchor: the same lookup on a classic (one-probe) ring of the same vnodes.
void BM_Owners3Classic(benchmark::State& state) {
  const Ring ring = BuildRing(static_cast<int>(state.range(0)), 1);
  NodeId owners[3];
  uint64_t index = 0;
  for (auto _ : state) {
    const absl::Status s = ring.FillOwners(HashObjectKey(5, index++), absl::MakeSpan(owners));
    benchmark::DoNotOptimize(s.ok());
    benchmark::DoNotOptimize(owners);
  }
  SetRingCounters(state, ring);
}
BENCHMARK(BM_Owners3Classic)->Arg(100);

// Owner only, on raw hashes (no object-key hashing).
void BM_OwnerOfHash(benchmark::State& state) {
  const Ring ring = BuildRing(static_cast<int>(state.range(0)), RingConfig().probes);
  uint64_t h = 0;
  for (auto _ : state) {
    h += 0x9e3779b97f4a7c15ULL;  // Weyl sequence: spreads consecutive lookups over the circle
    benchmark::DoNotOptimize(ring.OwnerOfHash(h));
  }
  SetRingCounters(state, ring);
}
BENCHMARK(BM_OwnerOfHash)->Arg(100);

// Owner only, as the cache ring needs it: a ring caching one owner per segment (fewer segments).
void BM_OwnerCacheRing(benchmark::State& state) {
  const Ring ring = BuildRing(static_cast<int>(state.range(0)), RingConfig().probes, 1);
  uint64_t index = 0;
  for (auto _ : state) benchmark::DoNotOptimize(ring.Owner(ObjectKey{5, index++}));
  SetRingCounters(state, ring);
}
BENCHMARK(BM_OwnerCacheRing)->Arg(100);

// Owner lists longer than the cached 3 walk the vnodes (e.g. home replicas plus log replicas).
void BM_Owners5Walk(benchmark::State& state) {
  const Ring ring = BuildRing(static_cast<int>(state.range(0)), RingConfig().probes);
  NodeId owners[5];
  uint64_t index = 0;
  for (auto _ : state) {
    const absl::Status s = ring.FillOwners(HashObjectKey(5, index++), absl::MakeSpan(owners));
    benchmark::DoNotOptimize(s.ok());
    benchmark::DoNotOptimize(owners);
  }
  SetRingCounters(state, ring);
}
BENCHMARK(BM_Owners5Walk)->Arg(100);

// Building a ring (done once per membership change).
void BM_Build(benchmark::State& state) {
  for (auto _ : state) {
    Ring ring = BuildRing(static_cast<int>(state.range(0)), RingConfig().probes);
    benchmark::DoNotOptimize(ring.num_segments());
  }
}
BENCHMARK(BM_Build)->Arg(100)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ringcache::ring

BENCHMARK_MAIN();
