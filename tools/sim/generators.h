// Seeded synthetic workload generators for ringcache-sim.
//
// A generator spec is "kind:key=value,key=value,..." (lists inside a value use '/'). Kinds:
//
//   zipf      Zipf(theta) popularity over `blocks` blocks (rank order scattered over the range
//             unless scatter=0).
//   uniform   uniform over `blocks` blocks.
//   scan      sequential pass(es) over `blocks` blocks, wrapping; `loops` sets the request count.
//   seqwrite  scan with write=1: one sequential write stream (CMF's worst case, paper 003).
//   hotspot   regional hot spots that move between cycles (paper 000 §II Table I): `areas` stable
//             popular areas of `area` blocks; in each cycle of `cycle` requests a window of
//             `window` blocks per area is hot (only a `density` fraction of its blocks, chosen by
//             hash, so hot blocks alternate with cold ones); the window moves by `step` blocks
//             each cycle; a `hot` fraction of requests goes to the windows, the rest is uniform
//             background noise over `blocks`.
//   multi     several VDIs, each Zipf over its own `blocks`, VDI chosen per request with weights
//             `rates` (list) or 1/(i+1)^skew (paper 002's multi-VDI mix).
//
// Common keys: requests, seed, write (write probability), vdi (first VDI id), size (request size
// in blocks), unit (block unit in bytes, default 4096), base (first block), iat_us (fixed
// inter-arrival time, default 100), start_us (time of the first request).
// Several specs given together are merged by timestamp (ties: in spec order), so different
// iat_us give different rates and start_us runs one after another.
//
// Random numbers come from a xoshiro256** generator seeded through splitmix64, so a spec produces
// the same trace on every platform and build.
//
// Thread-safety: generator objects are not thread-safe. ParseGeneratorSpec is pure.
#ifndef RINGCACHE_TOOLS_SIM_GENERATORS_H_
#define RINGCACHE_TOOLS_SIM_GENERATORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "tools/sim/trace.h"

namespace ringcache::sim {

// A deterministic 64-bit PRNG (xoshiro256**, seeded by splitmix64).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n). REQUIRES: n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t s_[4];
};

// splitmix64 finaliser: a good 64-bit mixing function.
uint64_t Mix64(uint64_t x);

// Samples ranks 1..n with P(k) ∝ k^-theta by rejection-inversion (Hörmann and Derflinger, "Rejection-
// inversion to generate variates from monotone discrete distributions", 1996): O(1) per sample
// and no table, for any theta >= 0.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double theta);
  uint64_t Sample(Rng& rng) const;  // in [1, n]

 private:
  double H(double x) const;
  double HInverse(double x) const;
  uint64_t n_;
  double theta_;
  double h_x1_;
  double h_n_;
  double s_;
};

// A parsed generator spec.
struct GeneratorSpec {
  std::string kind;
  std::map<std::string, std::string> params;  // as given
  std::string text;                           // the original spec
};

// Parses "kind:key=value,...". Checks the kind and that every key is known for it.
absl::StatusOr<GeneratorSpec> ParseGeneratorSpec(absl::string_view text);

// Builds the source for one spec (validating values), or, for several specs, their timestamp
// merge.
absl::StatusOr<std::unique_ptr<RequestSource>> MakeGenerator(const GeneratorSpec& spec);
absl::StatusOr<std::unique_ptr<RequestSource>> MakeGenerators(
    const std::vector<std::string>& specs);

// Returns a help text listing the kinds and their keys with defaults.
std::string GeneratorHelp();

// Merges several sources by Request::time_us (stable: ties go to the earlier source).
class MergedSource : public RequestSource {
 public:
  explicit MergedSource(std::vector<std::unique_ptr<RequestSource>> sources);
  absl::StatusOr<size_t> Read(absl::Span<Request> out) override;
  std::vector<std::string> VdiNames() const override;
  const SourceStats& stats() const override { return stats_; }

 private:
  struct Lane {
    std::unique_ptr<RequestSource> src;
    std::vector<Request> buf;
    size_t pos = 0;
    size_t len = 0;
    bool done = false;
  };
  std::vector<Lane> lanes_;
  SourceStats stats_;
};

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_GENERATORS_H_
