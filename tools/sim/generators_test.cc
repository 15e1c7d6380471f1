// Tests of the synthetic generators: determinism, spec validation, and the shape of each
// workload.
#include "tools/sim/generators.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringcache::sim {
namespace {

using ::testing::HasSubstr;

std::vector<Request> Generate(const std::vector<std::string>& specs) {
  auto src = MakeGenerators(specs);
  EXPECT_TRUE(src.ok()) << src.status();
  std::vector<Request> all, batch(1000);
  if (!src.ok()) return all;
  while (true) {
    absl::StatusOr<size_t> n = (*src)->Read(absl::MakeSpan(batch));
    if (!n.ok() || *n == 0) break;
    all.insert(all.end(), batch.begin(), batch.begin() + *n);
  }
  return all;
}

TEST(SimGenerators, RngIsDeterministicAndUniformEnough) {
  Rng a(42), b(42), c(43);
  EXPECT_EQ(a.Next(), b.Next());
  EXPECT_NE(a.Next(), c.Next());
  Rng r(1);
  std::vector<int> buckets(10, 0);
  for (int i = 0; i < 100000; ++i) ++buckets[r.Below(10)];
  for (int count : buckets) EXPECT_NEAR(count, 10000, 500);
  // Pin the stream: a change would silently change every generated trace.
  Rng p(1);
  EXPECT_EQ(p.Next(), 18001451845637162709ULL);
}

TEST(SimGenerators, ZipfSamplerMatchesTheDistribution) {
  for (double theta : {0.0, 0.5, 0.99, 1.0, 1.2}) {
    const uint64_t n = 50;
    ZipfSampler z(n, theta);
    Rng rng(9);
    std::vector<double> count(n + 1, 0);
    const int draws = 400000;
    for (int i = 0; i < draws; ++i) {
      uint64_t k = z.Sample(rng);
      ASSERT_GE(k, 1u);
      ASSERT_LE(k, n);
      ++count[k];
    }
    double norm = 0;
    for (uint64_t k = 1; k <= n; ++k) norm += std::pow(double(k), -theta);
    for (uint64_t k : {1, 2, 5, 50}) {
      double expect = draws * std::pow(double(k), -theta) / norm;
      EXPECT_NEAR(count[k], expect, 5 * std::sqrt(expect) + 1) << "theta " << theta << " k " << k;
    }
  }
}

TEST(SimGenerators, SameSpecSameTraceDifferentSeedDifferentTrace) {
  auto a = Generate({"zipf:blocks=1000,requests=2000,write=0.3,seed=5"});
  auto b = Generate({"zipf:blocks=1000,requests=2000,write=0.3,seed=5"});
  auto c = Generate({"zipf:blocks=1000,requests=2000,write=0.3,seed=6"});
  ASSERT_EQ(a.size(), 2000u);
  int same = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].offset, b[i].offset);
    EXPECT_EQ(a[i].op, b[i].op);
    same += a[i].offset == c[i].offset;
    diff += a[i].offset != c[i].offset;
  }
  EXPECT_GT(diff, same);
}

TEST(SimGenerators, ZipfRespectsRangeWriteRatioSizeAndTiming) {
  auto reqs = Generate(
      {"zipf:blocks=500,theta=0.9,requests=20000,write=0.25,size=2,unit=8192,base=10,"
       "iat_us=50,start_us=7,vdi=3"});
  ASSERT_EQ(reqs.size(), 20000u);
  int writes = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Request& r = reqs[i];
    EXPECT_EQ(r.length, 16384u);
    EXPECT_EQ(r.offset % 8192, 0u);
    EXPECT_GE(r.offset / 8192, 10u);
    EXPECT_LE(r.offset / 8192 + 2, 510u);
    EXPECT_EQ(r.vdi, 3u);
    EXPECT_EQ(r.time_us, 7 + 50 * i);
    writes += r.op == Op::kWrite;
  }
  EXPECT_NEAR(writes, 5000, 300);
}

TEST(SimGenerators, ScanAndSeqwriteAreSequentialAndWrap) {
  auto reqs = Generate({"scan:blocks=10,size=3,requests=7"});
  std::vector<uint64_t> blocks;
  for (const Request& r : reqs) blocks.push_back(r.offset / 4096);
  EXPECT_EQ(blocks, (std::vector<uint64_t>{0, 3, 6, 0, 3, 6, 0}));
  auto w = Generate({"seqwrite:blocks=100,loops=2"});
  ASSERT_EQ(w.size(), 200u);
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i].op, Op::kWrite);
    EXPECT_EQ(w[i].offset / 4096, i % 100);
  }
}

TEST(SimGenerators, HotspotWindowsMoveEveryCycleAndStayInAreas) {
  const std::string spec =
      "hotspot:blocks=100000,areas=2,area=1000,window=50,cycle=1000,hot=1,density=0.5,"
      "requests=4000";
  auto reqs = Generate({spec});
  ASSERT_EQ(reqs.size(), 4000u);
  std::vector<std::set<uint64_t>> per_cycle(4);
  for (size_t i = 0; i < reqs.size(); ++i) per_cycle[i / 1000].insert(reqs[i].offset / 4096);
  for (int c = 0; c < 4; ++c) {
    for (uint64_t b : per_cycle[c]) {
      uint64_t area = b / 50000;
      uint64_t in_area = b % 50000;
      EXPECT_LT(area, 2u);
      EXPECT_GE(in_area, uint64_t(c) * 50);  // window c covers [50c, 50c+50)
      EXPECT_LT(in_area, uint64_t(c) * 50 + 50);
    }
    // Only about half the window's blocks are hot: at most ~2 areas × 50 × 0.5 × slack.
    EXPECT_LT(per_cycle[c].size(), 80u);
    EXPECT_GT(per_cycle[c].size(), 20u);
  }
  // Consecutive cycles touch disjoint blocks: the hot spot moved.
  for (int c = 1; c < 4; ++c) {
    for (uint64_t b : per_cycle[c]) EXPECT_EQ(per_cycle[c - 1].count(b), 0u);
  }
}

TEST(SimGenerators, MultiVdiFollowsRatesAndPerVdiWriteRatios) {
  auto reqs = Generate(
      {"multi:vdis=3,rates=6/3/1,blocks=1000/2000/3000,write=0.1/0.5/0.9,requests=30000"});
  std::map<uint32_t, int> count, writes;
  std::map<uint32_t, uint64_t> max_block;
  for (const Request& r : reqs) {
    ++count[r.vdi];
    writes[r.vdi] += r.op == Op::kWrite;
    max_block[r.vdi] = std::max(max_block[r.vdi], r.offset / 4096);
  }
  EXPECT_NEAR(count[0], 18000, 500);
  EXPECT_NEAR(count[1], 9000, 400);
  EXPECT_NEAR(count[2], 3000, 300);
  EXPECT_NEAR(writes[0] / double(count[0]), 0.1, 0.02);
  EXPECT_NEAR(writes[2] / double(count[2]), 0.9, 0.03);
  EXPECT_LT(max_block[0], 1000u);
  EXPECT_LT(max_block[2], 3000u);
  auto skewed = Generate({"multi:vdis=2,skew=1,requests=30000"});
  int v0 = 0;
  for (const Request& r : skewed) v0 += r.vdi == 0;
  EXPECT_NEAR(v0, 20000, 500);  // weights 1 : 1/2
}

TEST(SimGenerators, SeveralSpecsMergeByTime) {
  auto reqs = Generate({"scan:blocks=100,requests=10,iat_us=10,vdi=0",
                        "scan:blocks=100,requests=5,iat_us=20,vdi=1,start_us=5"});
  ASSERT_EQ(reqs.size(), 15u);
  for (size_t i = 1; i < reqs.size(); ++i) EXPECT_LE(reqs[i - 1].time_us, reqs[i].time_us);
  auto names = MakeGenerators({"scan:vdi=0,requests=1", "scan:vdi=2,requests=1"});
  EXPECT_EQ((*names)->VdiNames(), (std::vector<std::string>{"vdi0", "", "vdi2"}));
}

TEST(SimGenerators, BadSpecsAreRejectedWithAReason) {
  EXPECT_THAT(ParseGeneratorSpec("zipff:blocks=1").status().message(), HasSubstr("unknown"));
  EXPECT_THAT(ParseGeneratorSpec("zipf:blocks").status().message(), HasSubstr("key=value"));
  EXPECT_THAT(ParseGeneratorSpec("zipf:area=5").status().message(), HasSubstr("unknown key"));
  EXPECT_THAT(ParseGeneratorSpec("zipf:seed=1,seed=2").status().message(),
              HasSubstr("twice"));
  for (const char* bad : {"zipf:blocks=0", "zipf:theta=-1", "zipf:write=1.5",
                          "zipf:blocks=abc", "scan:blocks=2,size=3",
                          "hotspot:window=100,area=50", "multi:vdis=2,write=0.1/0.2/0.3",
                          "zipf:unit=1000", "hotspot:blocks=100,areas=4,area=50"}) {
    auto spec = ParseGeneratorSpec(bad);
    ASSERT_TRUE(spec.ok()) << bad;
    EXPECT_FALSE(MakeGenerator(*spec).ok()) << bad;
  }
}

}  // namespace
}  // namespace ringcache::sim
