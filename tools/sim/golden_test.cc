// Golden tests: small traces from tests/data/sim replayed through the real policy engine (the
// registry, as ringcache-sim uses it), with exact hit and miss counts pinned per (trace, policy,
// size), and checked against independent computations:
//   - lru hits == Mattson stack-distance hits (reference.h), on every trace and size;
//   - fifo hits == a plain FIFO queue's hits;
//   - opt hits == Belady by direct scan, and == exhaustive search on the tiny traces;
//   - opt (with bypass) at a policy's total capacity >= that policy's hits, for every policy.
// The synthetic traces are regenerated from their specs and compared byte for byte with the
// checked-in files, so generator output stays stable across builds.
//
// To regenerate the pinned table after an intended policy change, run
//   RC_SIM_PRINT_GOLDEN=1 sim_test --gtest_filter='SimGolden.*'
// and paste the printed rows into kGolden (after checking the independent checks still pass).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "cachenode/policy/registry.h"
#include "tools/sim/binary_format.h"
#include "tools/sim/generators.h"
#include "tools/sim/policy_factory.h"
#include "tools/sim/reference.h"
#include "tools/sim/runner.h"
#include "tools/sim/trace_io.h"

namespace ringcache::sim {
namespace {

const std::string kData = RC_SIM_TEST_DATA_DIR;

struct GoldenTrace {
  std::string file;
  std::vector<std::string> gen;  // specs that produce the file ("" for hand-written traces)
  std::vector<uint64_t> sizes;
  bool tiny;  // few enough distinct blocks for exhaustive OPT
};

const std::vector<GoldenTrace>& Traces() {
  static const auto* traces = new std::vector<GoldenTrace>{
      {"msr_tiny.csv", {}, {1, 2, 4, 8}, true},
      {"spc_tiny.spc", {}, {1, 2, 4, 8}, true},
      {"fiu_tiny.txt", {}, {1, 2, 4, 8}, true},
      {"zipf_tiny.bin", {"zipf:blocks=12,theta=0.8,requests=30,write=0.3,seed=14"}, {1, 2, 4, 8},
       true},
      {"zipf_small.bin", {"zipf:blocks=300,theta=0.9,requests=3000,write=0.3,seed=11"},
       {8, 32, 128}, false},
      {"multi_small.bin",
       {"multi:vdis=3,blocks=100/200/400,rates=5/3/1,write=0.2/0.5/0.8,requests=3000,seed=12"},
       {8, 32, 128}, false},
      {"hotspot_small.bin",
       {"hotspot:blocks=20000,areas=2,area=512,window=32,cycle=500,requests=4000,seed=13"},
       {8, 32, 128}, false},
      {"scan_mix_small.bin",
       {"zipf:blocks=200,requests=2000,iat_us=100,seed=15",
        "seqwrite:blocks=600,size=4,requests=300,iat_us=500,vdi=1,seed=16"},
       {8, 32, 128}, false},
  };
  return *traces;
}

const std::vector<std::string>& Policies() {
  static const auto* p = new std::vector<std::string>{
      "lru",       "fifo",         "arc",           "s3fifo",           "cflru",
      "lru+sieve", "vbq+lru",      "vbq+lru+sieve", "vbq+lru+sieve+lcr", "lru+lcr",
      "fifo+rpac", "lru+rpac",     "lru+cmf",       "lru+seqcut",        "iarc",
      "garc",      "uarc",         "opt",           policy::kPreviousDefaultPolicy,
      policy::kDefaultPolicy,
      // The default under a tight write budget (issue 37): its tuner's margin moves on these.
      "vbq(share=utility)+arc+sieve(freq=1,region_adapt=1,seen=1,writes=1,budget=1)+lcr"};
  return *p;
}

bool IsTiered(const std::string& p) { return p == "iarc" || p == "garc" || p == "uarc"; }
uint64_t RamFor(const std::string& p, uint64_t size) {
  return IsTiered(p) ? std::max<uint64_t>(1, size / 2) : 0;
}

// The device model of the goldens: 4 data nodes, the first 3x slower, so LCR's choices matter.
RunOptions GoldenOptions() {
  RunOptions o;
  o.cost.data_nodes = 4;
  o.cost.node_speed = {3, 1, 1, 1};
  o.cost.object_size = 4096 * 4;  // 4-block objects spread a tiny trace over the nodes
  return o;
}

// Pinned results: {trace, policy, size} -> {hits, misses}. Plain aggregates (not a map
// initializer) keep this cheap to compile, also under sanitizers.
struct GoldenKey {
  const char* trace;
  const char* policy;
  uint64_t size;
};
struct GoldenCount {
  uint64_t hits;
  uint64_t misses;
};
struct GoldenRow {
  GoldenKey key;
  GoldenCount count;
};
constexpr GoldenRow kGolden[] = {
#include "tools/sim/golden_counts.inc"
};

using Key = std::tuple<std::string, std::string, uint64_t>;
const std::map<Key, GoldenCount>& Golden() {
  static const auto* g = [] {
    auto* m = new std::map<Key, GoldenCount>;
    for (const GoldenRow& row : kGolden) {
      m->emplace(Key{row.key.trace, row.key.policy, row.key.size}, row.count);
    }
    return m;
  }();
  return *g;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

SourceFactory FileSource(const std::string& path) {
  return [path]() { return OpenTraceFile(path, TraceFormat::kAuto, {}); };
}

TEST(SimGolden, SyntheticTracesMatchTheirSpecsByteForByte) {
  for (const GoldenTrace& t : Traces()) {
    if (t.gen.empty()) continue;
    std::string path = ::testing::TempDir() + "/regen_" + t.file;
    auto src = MakeGenerators(t.gen);
    ASSERT_TRUE(src.ok()) << src.status();
    ASSERT_TRUE(WriteBinaryTrace(**src, path, 4096).ok());
    EXPECT_EQ(Slurp(path), Slurp(kData + "/" + t.file)) << t.file << " differs from its spec";
    std::remove(path.c_str());
  }
}

TEST(SimGolden, ExactCountsAndIndependentChecks) {
#ifndef RC_SIM_HAVE_REGISTRY
  GTEST_SKIP() << "cachenode/policy/registry.h is not built yet";
#endif
  const bool print = std::getenv("RC_SIM_PRINT_GOLDEN") != nullptr;
  PolicyFactory factory = RegistryPolicyFactory();
  for (const GoldenTrace& t : Traces()) {
    SCOPED_TRACE(t.file);
    std::string path = kData + "/" + t.file;
    auto src = OpenTraceFile(path, TraceFormat::kAuto, {});
    ASSERT_TRUE(src.ok()) << src.status();
    auto keys = ExpandToBlocks(**src, 4096);
    ASSERT_TRUE(keys.ok());
    std::vector<uint64_t> dist = LruStackDistances(*keys);
    auto summary = SummarizeTrace(FileSource(path), 4096, /*want_next_use=*/true);
    ASSERT_TRUE(summary.ok());
    ASSERT_EQ(summary->accesses, keys->size());

    for (uint64_t size : t.sizes) {
      for (const std::string& p : Policies()) {
        SCOPED_TRACE(absl::StrCat(p, " size ", size));
        uint64_t ram = RamFor(p, size);
        auto r = RunOne(FileSource(path), factory, p, size, ram, GoldenOptions(),
                        &summary->next_use);
        ASSERT_TRUE(r.ok()) << r.status();
        uint64_t hits = r->hits_ram + r->hits_ssd;
        EXPECT_EQ(hits + r->misses, keys->size());
        if (print) {
          std::printf("{{\"%s\", \"%s\", %lu}, {%lu, %lu}},\n", t.file.c_str(), p.c_str(),
                      static_cast<unsigned long>(size), static_cast<unsigned long>(hits),
                      static_cast<unsigned long>(r->misses));
        } else {
          auto it = Golden().find(Key{t.file, p, size});
          ASSERT_NE(it, Golden().end()) << "no pinned count; see the file comment";
          EXPECT_EQ(hits, it->second.hits) << "hits";
          EXPECT_EQ(r->misses, it->second.misses) << "misses";
        }
        // Independent checks.
        if (p == "lru") {
          EXPECT_EQ(hits, LruHitsFromDistances(dist, size));
        }
        if (p == "fifo") {
          EXPECT_EQ(hits, FifoHits(*keys, size));
        }
        if (p == "opt") {
          EXPECT_EQ(hits, BeladyHits(*keys, size, /*allow_bypass=*/true));
          if (t.tiny) {
            auto brute = BruteForceOptHits(*keys, size, /*allow_bypass=*/true);
            ASSERT_TRUE(brute.ok()) << brute.status();
            EXPECT_EQ(hits, *brute);
          }
        }
        uint64_t bound = BeladyHits(*keys, size + ram, /*allow_bypass=*/true);
        EXPECT_LE(hits, bound) << "OPT at " << size + ram << " blocks must bound " << p;
      }
    }
  }
}

TEST(SimGolden, BruteForceAgreesWithBeladyOnTheTinyTraces) {
  for (const GoldenTrace& t : Traces()) {
    if (!t.tiny) continue;
    auto src = OpenTraceFile(kData + "/" + t.file, TraceFormat::kAuto, {});
    ASSERT_TRUE(src.ok());
    auto keys = ExpandToBlocks(**src, 4096);
    for (uint64_t size : t.sizes) {
      for (bool bypass : {true, false}) {
        EXPECT_EQ(*BruteForceOptHits(*keys, size, bypass), BeladyHits(*keys, size, bypass))
            << t.file << " size " << size << " bypass " << bypass;
      }
    }
  }
}

}  // namespace
}  // namespace ringcache::sim

namespace ringcache::sim {
namespace {

// VBQ on the multi-VDI trace: the simulator's own count of cached blocks per VDI (Lookup before
// and after each access) equals the queue lengths VBQ reports; hotter VDIs hold more blocks; and
// U_i - D_i grows as VDIs get colder (paper 002 eq. 6).
TEST(SimGolden, VbqPerVdiSpaceAndEquationSix) {
#if !defined(RC_SIM_HAVE_REGISTRY) || !defined(RC_SIM_HAVE_VDI_STATS)
  GTEST_SKIP() << "needs the policy registry and CachePolicy::AppendVdiStats";
#endif
  RunOptions opt;
  opt.track_occupancy = true;
  std::string path = kData + "/multi_small.bin";
  for (const char* spec : {"vbq+lru", "vbq+lru+sieve"}) {
    for (uint64_t size : {32, 128}) {
      SCOPED_TRACE(absl::StrCat(spec, " size ", size));
      auto r = RunOne(FileSource(path), RegistryPolicyFactory(), spec, size, 0, opt, nullptr);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->per_vdi.size(), 3u);
      std::vector<const VdiStats*> by_heat;
      for (const VdiStats& v : r->per_vdi) {
        ASSERT_TRUE(v.has_queue);
        EXPECT_EQ(static_cast<uint64_t>(v.occupancy), v.queue_blocks);
        EXPECT_EQ(v.queue_accesses, v.accesses);
        by_heat.push_back(&v);
      }
      std::sort(by_heat.begin(), by_heat.end(), [](const VdiStats* a, const VdiStats* b) {
        return a->queue_accesses > b->queue_accesses;
      });
      for (size_t i = 1; i < by_heat.size(); ++i) {
        EXPECT_GE(by_heat[i - 1]->occupancy, by_heat[i]->occupancy) << "hotter VDI, more space";
        EXPECT_LE(by_heat[i - 1]->queue_upper - by_heat[i - 1]->queue_lower,
                  by_heat[i]->queue_upper - by_heat[i]->queue_lower)
            << "eq. 6";
      }
    }
  }
}

}  // namespace
}  // namespace ringcache::sim
