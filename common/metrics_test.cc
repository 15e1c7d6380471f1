#include "common/metrics.h"

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"

namespace ringcache::metrics {
namespace {

TEST(MetricsTest, RendersCountersGaugesWithLabelsSorted) {
  Registry r;
  r.GetCounter("ringcache_test_ops_total", "Ops.", {{"op", "read"}, {"a", "x"}})->Inc(3);
  r.GetGauge("ringcache_test_level", "Level.")->Set(2.5);
  const std::string out = r.Render();
  EXPECT_NE(out.find("# TYPE ringcache_test_ops_total counter"), std::string::npos);
  EXPECT_NE(out.find("ringcache_test_ops_total{a=\"x\",op=\"read\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("ringcache_test_level 2.5\n"), std::string::npos);
}

TEST(MetricsTest, SameLabelsReturnSameChild) {
  Registry r;
  Counter* a = r.GetCounter("c_total", "c", {{"k", "v"}});
  Counter* b = r.GetCounter("c_total", "c", {{"k", "v"}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, r.GetCounter("c_total", "c", {{"k", "w"}}));
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Registry r;
  Histogram* h = r.GetHistogram("lat_seconds", "Latency.", {}, {0.1, 1.0});
  h->Observe(0.05);
  h->Observe(0.5);
  h->Observe(5);
  const std::string out = r.Render();
  EXPECT_NE(out.find("lat_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_seconds_bucket{le=\"1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lat_seconds_count 3\n"), std::string::npos) << out;
}

TEST(MetricsTest, EscapesLabelValues) {
  Registry r;
  r.GetCounter("e_total", "e", {{"name", "a\"b\\c\nd"}})->Inc();
  EXPECT_NE(r.Render().find("e_total{name=\"a\\\"b\\\\c\\nd\"} 1"), std::string::npos);
}

TEST(MetricsTest, CallbackGaugeReadAtRender) {
  Registry r;
  double v = 1;
  r.AddCallbackGauge("cb_level", "cb", {}, [&v] { return v; });
  v = 7;
  EXPECT_NE(r.Render().find("cb_level 7\n"), std::string::npos);
}

TEST(MetricsTest, CallbackCounterReadAtRender) {
  Registry r;
  r.AddCallbackCounter("cbc_total", "cb", {{"vdi", "a"}}, [] { return 42.0; });
  EXPECT_NE(r.Render().find("cbc_total{vdi=\"a\"} 42\n"), std::string::npos);
}

TEST(MetricsTest, NameValidation) {
  EXPECT_TRUE(IsValidMetricName("ringcache_x:y_1"));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
}

#ifdef RINGCACHE_PROMTOOL
TEST(MetricsTest, PromtoolAcceptsRenderedOutput) {
  Registry r;
  r.GetCounter("ringcache_requests_total", "Requests served.", {{"op", "read"}})->Inc(5);
  r.GetGauge("ringcache_dirty_bytes", "Dirty bytes.")->Set(4096);
  r.GetHistogram("ringcache_request_duration_seconds", "Latency.", {{"op", "read"}})
      ->Observe(0.001);
  const std::string path = ::testing::TempDir() + "/metrics.txt";
  std::ofstream(path) << r.Render();
  const std::string cmd = std::string(RINGCACHE_PROMTOOL) + " check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_EQ(out, "") << out;
}
#endif

}  // namespace
}  // namespace ringcache::metrics
