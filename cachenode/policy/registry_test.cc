// Tests of the policy registry (registry.h): every known spec builds and runs, the grammar's
// parameters reach the components, and bad specs name the bad token.
#include "cachenode/policy/registry.h"

#include <random>
#include <string>

#include "cachenode/policy/driver.h"
#include "cachenode/policy/sieve.h"
#include "cachenode/policy/test_util.h"
#include "cachenode/policy/vbq.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

PolicyContext Ctx(size_t cap = 64) {
  PolicyContext c;
  c.capacity_blocks = cap;
  c.ram_blocks = 8;
  return c;
}

TEST(RegistryTest, EveryKnownPolicyBuildsAndRuns) {
  std::mt19937_64 rng(2);
  std::vector<Access> trace;
  for (int i = 0; i < 3000; ++i) {
    const uint64_t b = rng() % 200;
    trace.push_back(rng() % 4 == 0 ? Write(b, rng() % 2) : Read(b, rng() % 2));
  }
  for (uint64_t i = 0; i < trace.size(); ++i) trace[i].next_use = kNever;  // OPT needs it
  for (const std::string& spec : KnownPolicies()) {
    absl::StatusOr<std::unique_ptr<CachePolicy>> p = MakePolicy(spec, Ctx());
    ASSERT_TRUE(p.ok()) << spec << ": " << p.status();
    const testing::Tally t = testing::Replay(**p, trace);
    EXPECT_EQ(t.hits + t.misses, trace.size()) << spec;
    EXPECT_LE((*p)->size(), (*p)->capacity()) << spec;
    EXPECT_GT((*p)->MetadataBytes(), 0u) << spec;
  }
}

TEST(RegistryTest, KnownPoliciesCoverEveryComponent) {
  std::string all;
  for (const std::string& s : KnownPolicies()) all += "+" + s + "+";
  for (const std::string& c : KnownComponents()) {
    if (c == "always") continue;  // the default admission
    EXPECT_NE(all.find("+" + c + "+"), std::string::npos) << c;
  }
}

TEST(RegistryTest, NameIsTheSpecWithoutSpaces) {
  auto p = MakePolicy(" vbq + lru + sieve( threshold = 3 ) ", Ctx());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->name(), "vbq+lru+sieve(threshold=3)");
}

TEST(RegistryTest, ParametersReachTheComponents) {
  auto p = MakePolicy("lru+sieve(threshold=3,len=10)", Ctx());
  ASSERT_TRUE(p.ok()) << p.status();
  Outcome out;
  (*p)->OnAccess(Read(1), &out);
  (*p)->OnAccess(Read(1), &out);
  EXPECT_TRUE(out.rejected);
  (*p)->OnAccess(Read(1), &out);
  EXPECT_TRUE(out.admitted);  // the third read miss: threshold 3

  auto v = MakePolicy("vbq(umax=0.9,umin=0.8,dmax=0.7,dmin=0.6,xi=0.9,alpha=0.5)", Ctx(10));
  ASSERT_TRUE(v.ok()) << v.status();
  // xi * S = 9: the tenth insertion first reclaims.
  for (uint64_t b = 0; b < 9; ++b) (*v)->OnAccess(Read(b), &out);
  EXPECT_TRUE(out.evicted.empty());
  (*v)->OnAccess(Read(9), &out);
  EXPECT_FALSE(out.evicted.empty());
}

TEST(RegistryTest, DefaultsAreDrawnFromTheContext) {
  // Sieve length defaults to a quarter of the cache: 64 -> 16 keys remembered.
  auto p = MakePolicy("lru+sieve", Ctx(64));
  ASSERT_TRUE(p.ok());
  Outcome out;
  for (uint64_t b = 0; b < 17; ++b) (*p)->OnAccess(Read(b), &out);  // 0 forgotten
  (*p)->OnAccess(Read(0), &out);
  EXPECT_TRUE(out.rejected);
  (*p)->OnAccess(Read(16), &out);
  EXPECT_TRUE(out.admitted);
}

void ExpectError(std::string_view spec, std::string_view needle, PolicyContext ctx = Ctx()) {
  absl::StatusOr<std::unique_ptr<CachePolicy>> p = MakePolicy(spec, ctx);
  ASSERT_FALSE(p.ok()) << spec;
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  EXPECT_NE(std::string(p.status().message()).find(needle), std::string::npos)
      << spec << " -> " << p.status();
}

TEST(RegistryTest, BadSpecsNameTheBadToken) {
  ExpectError("lru+foo", "'foo'");
  ExpectError("LRU", "'LRU'");
  ExpectError("", "empty component");
  ExpectError("lru++sieve", "empty component");
  ExpectError("lru+sieve(thresh=2)", "'thresh'");
  ExpectError("lru+sieve(threshold=x)", "'x'");
  ExpectError("lru+sieve(threshold)", "'threshold'");
  ExpectError("lru+sieve(threshold=2", "missing ')'");
  ExpectError("lru+sieve(threshold=2,threshold=3)", "given twice");
  ExpectError("lru+fifo", "more than one order");
  ExpectError("lru+sieve+rpac", "more than one admission");
  ExpectError("cmf+lru+cmf", "'cmf' given twice");
  ExpectError("vbq+rpac", "'rpac' cannot be combined with 'vbq'");
  ExpectError("vbq(umax=0.99)", "eq. 8");
  ExpectError("vbq(umin=0.5)", "eq. 3");
  ExpectError("lru", "capacity_blocks", Ctx(0));
  ExpectError("rpac(depth=4,region=8)", "2^depth");
  ExpectError("lru+sieve(budget=2)", "budget needs freq=1");
  ExpectError("lru+sieve(freq=1,budget=-2)", "budget");
}

TEST(RegistryTest, TieredAndOptUseTheOtherFactories) {
  auto u = MakePolicy("uarc", Ctx(64));
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ((*u)->name(), "uarc");
  auto o = MakePolicy("opt", Ctx(64));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ((*o)->name(), "opt");
  auto r = MakePolicy("iarc(ram=4)", Ctx(64));
  ASSERT_TRUE(r.ok()) << r.status();
  PolicyContext no_ram = Ctx();
  no_ram.ram_blocks = 0;
  ExpectError("uarc", "uarc", no_ram);
  ExpectError("uarc+lru", "'uarc' is a complete policy");
  ExpectError("opt(bypass=maybe)", "'maybe'");
  auto nb = MakePolicy("opt(bypass=0)", Ctx(64));
  ASSERT_TRUE(nb.ok()) << nb.status();
  EXPECT_EQ((*nb)->name(), "opt-nobypass");
}

}  // namespace
}  // namespace ringcache::policy
