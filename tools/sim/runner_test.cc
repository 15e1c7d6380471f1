// Tests of the replay loop's accounting, with small test-only policies so the runner is checked
// independently of the policy engine.
#include "tools/sim/runner.h"

#include <list>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/sim/generators.h"
#include "tools/sim/policy_factory.h"
#include "tools/sim/reference.h"

namespace ringcache::sim {
namespace {

using policy::Access;
using policy::BlockKey;
using policy::Outcome;
using policy::Tier;

// A plain write-back LRU over `capacity` blocks. Optionally bypasses every write (write-around).
class TestLru : public policy::CachePolicy {
 public:
  TestLru(size_t capacity, bool write_around) : cap_(capacity), write_around_(write_around) {}
  std::string_view name() const override { return "test-lru"; }
  void OnAccess(const Access& a, Outcome* out) override {
    out->Reset();
    ++seen_;
    auto it = map_.find(a.key);
    if (write_around_ && a.op == policy::Op::kWrite) {
      out->bypassed = true;
      if (it != map_.end()) {
        out->hit = Tier::kSsd;
        list_.erase(it->second.pos);
        map_.erase(it);
      }
      return;
    }
    if (it != map_.end()) {
      out->hit = Tier::kSsd;
      list_.splice(list_.begin(), list_, it->second.pos);
      if (a.op == policy::Op::kWrite) {
        it->second.dirty = true;
        out->ssd_writes = 1;
      }
      return;
    }
    if (map_.size() == cap_) {
      BlockKey victim = list_.back();
      list_.pop_back();
      out->evicted.push_back({victim, map_[victim].dirty, Tier::kSsd});
      map_.erase(victim);
    }
    list_.push_front(a.key);
    map_[a.key] = Entry{list_.begin(), a.op == policy::Op::kWrite};
    out->admitted = true;
    out->ssd_writes = 1;
  }
  bool MarkClean(const BlockKey& k) override {
    auto it = map_.find(k);
    if (it == map_.end()) return false;
    it->second.dirty = false;
    return true;
  }
  bool Erase(const BlockKey&) override { return false; }
  Tier Lookup(const BlockKey& k) const override {
    return map_.contains(k) ? Tier::kSsd : Tier::kNone;
  }
  size_t size() const override { return map_.size(); }
  size_t capacity() const override { return cap_; }
  size_t dirty_count() const override {
    size_t n = 0;
    for (const auto& [k, e] : map_) n += e.dirty;
    return n;
  }
  size_t MetadataBytes() const override { return map_.size() * 40; }
  uint64_t seen() const { return seen_; }

 private:
  struct Entry {
    std::list<BlockKey>::iterator pos;
    bool dirty = false;
  };
  size_t cap_;
  bool write_around_;
  std::list<BlockKey> list_;
  absl::flat_hash_map<BlockKey, Entry> map_;
  uint64_t seen_ = 0;
};

// A source over a fixed vector.
class VectorSource : public RequestSource {
 public:
  explicit VectorSource(std::vector<Request> reqs) : reqs_(std::move(reqs)) {}
  absl::StatusOr<size_t> Read(absl::Span<Request> out) override {
    size_t n = 0;
    while (n < out.size() && pos_ < reqs_.size()) out[n++] = reqs_[pos_++];
    stats_.requests += n;
    return n;
  }
  std::vector<std::string> VdiNames() const override { return {"first", "second"}; }
  const SourceStats& stats() const override { return stats_; }

 private:
  std::vector<Request> reqs_;
  size_t pos_ = 0;
  SourceStats stats_;
};

SourceFactory Fixed(std::vector<Request> reqs) {
  return [reqs]() -> absl::StatusOr<std::unique_ptr<RequestSource>> {
    return std::unique_ptr<RequestSource>(new VectorSource(reqs));
  };
}

PolicyFactory LruFactory(bool write_around = false) {
  return [write_around](const PolicyRequest& r)
             -> absl::StatusOr<std::unique_ptr<policy::CachePolicy>> {
    return std::unique_ptr<policy::CachePolicy>(new TestLru(r.capacity_blocks, write_around));
  };
}

Request R(uint64_t t, uint32_t vdi, uint64_t block, uint32_t blocks, Op op) {
  Request r;
  r.time_us = t;
  r.vdi = vdi;
  r.offset = block * 4096;
  r.length = blocks * 4096;
  r.op = op;
  return r;
}

TEST(SimRunner, CountsAndCostsFollowTheDocumentedOrder) {
  // Capacity 2. Accesses: r0 (miss), w1 (miss, dirty), r0 (hit), r2 (miss, evicts 1 dirty),
  // r1 r2 as one 2-block request at t=100000 (1: miss evicting 0 clean; 2: hit).
  std::vector<Request> reqs = {R(0, 0, 0, 1, Op::kRead), R(0, 0, 1, 1, Op::kWrite),
                               R(0, 0, 0, 1, Op::kRead), R(0, 1, 2, 1, Op::kRead),
                               R(100000, 0, 1, 1, Op::kRead)};
  RunOptions opt;
  auto res = RunOne(Fixed(reqs), LruFactory(), "test", 2, 0, opt, nullptr);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->requests, 5u);
  EXPECT_EQ(res->accesses, 5u);
  EXPECT_EQ(res->reads, 4u);
  EXPECT_EQ(res->writes, 1u);
  EXPECT_EQ(res->hits_ssd, 1u);
  EXPECT_EQ(res->misses, 4u);
  EXPECT_EQ(res->hdd_reads, 3u);  // three read misses
  EXPECT_EQ(res->replacements, 2u);
  EXPECT_EQ(res->dirty_evictions, 1u);
  EXPECT_EQ(res->hdd_writes, 1u);
  EXPECT_EQ(res->ssd_writes, 4u);  // four fills
  EXPECT_EQ(res->read_hits_ssd, 1u);
  // Serial time: 1 SSD read + 4 SSD writes + 3 HDD reads + 1 HDD write.
  EXPECT_DOUBLE_EQ(res->virtual_time_s, (25 + 4 * 200 + 3 * 5000 + 5000) / 1e6);
  EXPECT_EQ(res->per_vdi.size(), 2u);
  EXPECT_EQ(res->per_vdi[0].name, "first");
  EXPECT_EQ(res->per_vdi[1].accesses, 1u);
  EXPECT_EQ(res->per_vdi[0].hdd_writes, 1u);  // its dirty victim
  EXPECT_EQ(res->dirty_at_end, 0u);
  EXPECT_EQ(res->cached_at_end, 2u);
  EXPECT_EQ(res->metadata_bytes, 80u);
}

TEST(SimRunner, ResponseTimeQueuesBehindEarlierWork) {
  // Two read misses at t=0 on one data node: 5000+200 and 10000+400 µs (SSD fill after HDD).
  std::vector<Request> reqs = {R(0, 0, 0, 1, Op::kRead), R(0, 0, 1, 1, Op::kRead)};
  RunOptions opt;
  auto res = RunOne(Fixed(reqs), LruFactory(), "test", 4, 0, opt, nullptr);
  ASSERT_TRUE(res.ok());
  EXPECT_DOUBLE_EQ(res->mean_response_us, (5200.0 + 10200.0) / 2);
  EXPECT_DOUBLE_EQ(res->makespan_s, 10200 / 1e6);
  // iodepth 1: the second is issued when the first completes (same times, closed loop).
  opt.iodepth = 1;
  res = RunOne(Fixed(reqs), LruFactory(), "test", 4, 0, opt, nullptr);
  EXPECT_DOUBLE_EQ(res->mean_response_us, 5200.0);
  EXPECT_DOUBLE_EQ(res->makespan_s, 10400 / 1e6);
}

TEST(SimRunner, MultiBlockRequestsSplitAtBlockBoundaries) {
  Request r;
  r.offset = 4096 - 512;  // straddles blocks 0 and 1
  r.length = 1024;
  std::vector<Request> reqs = {r, R(0, 0, 0, 3, Op::kRead)};
  RunOptions opt;
  auto res = RunOne(Fixed(reqs), LruFactory(), "test", 8, 0, opt, nullptr);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->accesses, 5u);
  EXPECT_EQ(res->hits_ssd, 2u);
  opt.block_size = 8192;
  res = RunOne(Fixed(reqs), LruFactory(), "test", 8, 0, opt, nullptr);
  EXPECT_EQ(res->accesses, 3u);  // 1 + blocks 0..1 of 8 KiB
}

TEST(SimRunner, BypassedWritesGoToTheDataNode) {
  std::vector<Request> reqs = {R(0, 0, 0, 1, Op::kRead), R(0, 0, 0, 1, Op::kWrite),
                               R(0, 0, 5, 1, Op::kWrite)};
  RunOptions opt;
  auto res = RunOne(Fixed(reqs), LruFactory(/*write_around=*/true), "test", 8, 0, opt, nullptr);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->bypassed, 2u);
  EXPECT_EQ(res->hdd_writes, 2u);
  EXPECT_EQ(res->hdd_reads, 1u);
}

TEST(SimRunner, DrainChargesRemainingDirtyBlocks) {
  std::vector<Request> reqs = {R(0, 0, 0, 1, Op::kWrite), R(0, 0, 1, 1, Op::kWrite)};
  RunOptions opt;
  opt.drain = true;
  auto res = RunOne(Fixed(reqs), LruFactory(), "test", 8, 0, opt, nullptr);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->dirty_at_end, 2u);
  EXPECT_EQ(res->hdd_writes, 2u);
  EXPECT_DOUBLE_EQ(res->virtual_time_s, (2 * 200 + 2 * 5000) / 1e6);
}

TEST(SimRunner, OccupancyTracksBlocksPerVdi) {
  std::vector<Request> reqs = {R(0, 0, 0, 3, Op::kRead), R(0, 1, 0, 2, Op::kRead),
                               R(0, 1, 7, 1, Op::kRead)};
  RunOptions opt;
  opt.track_occupancy = true;
  auto res = RunOne(Fixed(reqs), LruFactory(), "test", 4, 0, opt, nullptr);
  ASSERT_TRUE(res.ok());
  // LRU of 4: vdi0 {0,1,2}, vdi1 {0,1} -> evicts vdi0:0; then vdi1:7 evicts vdi0:1.
  EXPECT_EQ(res->per_vdi[0].occupancy, 1);
  EXPECT_EQ(res->per_vdi[1].occupancy, 3);
}

TEST(SimRunner, MaxRequestsStopsEarly) {
  RunOptions opt;
  opt.max_requests = 100;
  SourceFactory gen = [] { return MakeGenerators({"zipf:blocks=1000,requests=5000"}); };
  auto res = RunOne(gen, LruFactory(), "test", 50, 0, opt, nullptr);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->requests, 100u);
}

#ifdef RC_SIM_HAVE_REGISTRY
// --ssd-budget: a read-mostly zipf trace of 100 s (10,000 requests a second) at a budget of
// 200 GiB a day (607 blocks/s) with a 10 s bucket. Without the budget LRU writes ~10x that; with
// it, the SSD writes stay within rate x span + one bucket, and the misses it sent around show.
TEST(SimRunner, AnSsdBudgetHoldsTheWritesToItsRate) {
  SourceFactory gen = [] {
    return MakeGenerators({"zipf:blocks=200000,theta=0.9,requests=1000000,iat_us=100,"
                           "write=0.1,seed=2"});
  };
  RunOptions opt;
  auto free = RunOne(gen, RegistryPolicyFactory(), "lru", 4000, 0, opt, nullptr);
  ASSERT_TRUE(free.ok()) << free.status();
  opt.ssd_budget_bytes_per_day = 200.0 * (1 << 30);
  opt.budget_burst_s = 10;
  auto held = RunOne(gen, RegistryPolicyFactory(), "lru", 4000, 0, opt, nullptr);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(free->budget_blocks_per_s, 0);
  EXPECT_NEAR(held->budget_blocks_per_s, 200.0 * (1 << 30) / 86400 / 4096, 1e-9);
  EXPECT_NEAR(held->arrival_span_s, 100, 1);
  const double allowed = held->budget_blocks_per_s * (held->arrival_span_s + 10);
  EXPECT_GT(free->ssd_writes, 5 * allowed);
  EXPECT_LE(held->ssd_writes, allowed);
  EXPECT_GT(held->ssd_writes, allowed / 2);
  EXPECT_GT(held->budget_around, free->accesses / 4);
  EXPECT_EQ(held->bypassed, held->budget_around);
}
#endif

TEST(SimRunner, SummaryCountsWorkingSetAndNextUse) {
  std::vector<Request> reqs = {R(0, 0, 0, 2, Op::kRead), R(0, 1, 0, 1, Op::kRead),
                               R(0, 0, 1, 1, Op::kWrite), R(0, 0, 0, 1, Op::kRead)};
  auto sum = SummarizeTrace(Fixed(reqs), 4096, true);
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->requests, 4u);
  EXPECT_EQ(sum->accesses, 5u);
  EXPECT_EQ(sum->unique_blocks, 3u);
  EXPECT_EQ(sum->unique_per_vdi, (std::vector<uint64_t>{2, 1}));
  // accesses: 0:(0,0) 1:(0,1) 2:(1,0) 3:(0,1) 4:(0,0)
  EXPECT_EQ(sum->next_use,
            (std::vector<uint64_t>{4, 3, policy::kNever, policy::kNever, policy::kNever}));
}

TEST(SimRunner, TestLruAgreesWithStackDistanceOnAGeneratedTrace) {
  // Sanity of the harness itself: the runner's hit count for a true LRU equals Mattson's.
  SourceFactory gen = [] {
    return MakeGenerators({"zipf:blocks=2000,theta=0.8,requests=20000,write=0.3,size=2"});
  };
  auto src = gen();
  auto keys = ExpandToBlocks(**src, 4096);
  ASSERT_TRUE(keys.ok());
  auto dist = LruStackDistances(*keys);
  for (uint64_t cap : {10, 100, 1000}) {
    auto res = RunOne(gen, LruFactory(), "test", cap, 0, RunOptions{}, nullptr);
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->hits_ssd, LruHitsFromDistances(dist, cap)) << cap;
  }
}

TEST(SimRunner, IsOfflineSpec) {
  EXPECT_TRUE(IsOfflineSpec("opt"));
  EXPECT_TRUE(IsOfflineSpec("opt(bypass=false)"));
  EXPECT_FALSE(IsOfflineSpec("lru"));
  EXPECT_FALSE(IsOfflineSpec("vbq+lru+sieve"));
  EXPECT_FALSE(IsOfflineSpec("optimistic"));
}

}  // namespace
}  // namespace ringcache::sim
