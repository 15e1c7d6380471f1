#include "common/metrics.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include "common/daemon.h"
#include "common/socket.h"
#include "gtest/gtest.h"

namespace ringcache::metrics {
namespace {

TEST(MetricsTest, RendersCountersGaugesWithLabelsSorted) {
  Registry r;
  r.GetCounter("ringcache_test_ops_total", "Ops.", {{"op", "read"}, {"a", "x"}})->Increment(3);
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
  r.GetCounter("e_total", "e", {{"name", "a\"b\\c\nd"}})->Increment();
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

TEST(MetricsTest, RemoveSeriesDropsEveryFamilysSeriesOfThatLabelValue) {
  Registry r;
  r.GetCounter("ops_total", "o", {{"vdi", "a"}})->Increment();
  r.GetCounter("ops_total", "o", {{"vdi", "b"}})->Increment();
  r.GetHistogram("lat_seconds", "l", {{"vdi", "a"}, {"op", "read"}})->Observe(0.1);
  r.AddCallbackGauge("dirty_bytes", "d", {{"vdi", "a"}}, [] { return 1.0; });
  EXPECT_EQ(r.RemoveSeries({{"op", "read"}, {"vdi", "b"}}), 0u);  // all labels must match
  EXPECT_EQ(r.RemoveSeries({{"vdi", "a"}}), 3u);
  const std::string out = r.Render();
  EXPECT_EQ(out.find("vdi=\"a\""), std::string::npos) << out;
  EXPECT_NE(out.find("ops_total{vdi=\"b\"} 1"), std::string::npos) << out;
  // The name can be used again for a new object of the same name.
  r.GetCounter("ops_total", "o", {{"vdi", "a"}})->Increment(2);
  EXPECT_NE(r.Render().find("ops_total{vdi=\"a\"} 2"), std::string::npos);
}

TEST(MetricsTest, ConflictingRegistrationsGetADetachedMetric) {
  Registry r;
  r.GetCounter("x_total", "x")->Increment();
  Gauge* g = r.GetGauge("x_total", "x");  // another type: detached, never exported
  g->Set(5);
  r.AddCallbackGauge("x_total", "x", {}, [] { return 9.0; });  // taken by a handle: ignored
  const std::string out = r.Render();
  EXPECT_NE(out.find("x_total 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("x_total 5"), std::string::npos) << out;
  EXPECT_EQ(out.find("x_total 9"), std::string::npos) << out;
}

TEST(MetricsTest, ProcessMetricsReadTheProcess) {
  Registry r;
  AddProcessMetrics(&r);
  const std::string out = r.Render();
  for (const char* name : {"process_cpu_seconds_total ", "process_resident_memory_bytes ",
                           "process_open_fds ", "process_max_fds ", "process_start_time_seconds ",
                           "process_threads "}) {
    const size_t at = out.find(std::string("\n") + name);
    ASSERT_NE(at, std::string::npos) << name << "\n" << out;
    const double v = std::stod(out.substr(at + 1 + std::string(name).size()));
    if (std::string(name).rfind("process_cpu", 0) == 0) {
      EXPECT_GE(v, 0) << name;  // clock ticks: a young process may have used none yet
    } else {
      EXPECT_GT(v, 0) << name;
    }
  }
}

TEST(MetricsTest, GaugeCollectorProducesItsSeriesAtScrapeTime) {
  Registry r;
  Registry::Samples now{{{{"node", "1"}, {"state", "up"}}, 1}};
  r.AddGaugeCollector("members", "m", [&now] { return now; });
  EXPECT_NE(r.Render().find("members{node=\"1\",state=\"up\"} 1"), std::string::npos);
  now = {{{{"state", "down"}, {"node", "1"}}, 1}, {{{"node", "2"}, {"state", "up"}}, 1}};
  const std::string out = r.Render();
  EXPECT_EQ(out.find("members{node=\"1\",state=\"up\"}"), std::string::npos) << out;
  EXPECT_NE(out.find("members{node=\"1\",state=\"down\"} 1"), std::string::npos) << out;
  EXPECT_NE(out.find("members{node=\"2\",state=\"up\"} 1"), std::string::npos) << out;
}

TEST(MetricsTest, NameValidation) {
  EXPECT_TRUE(IsValidMetricName("ringcache_x:y_1"));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
}

// GET `path` from 127.0.0.1:`port`; returns the whole response.
std::string HttpGet(int port, const std::string& path) {
  absl::StatusOr<int> fd = DialTcp("127.0.0.1", port, absl::Seconds(5));
  if (!fd.ok()) return "";
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  (void)!write(*fd, req.data(), req.size());
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(*fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(*fd);
  return out;
}

TEST(MetricsServerTest, ServesMetricsAndHealthOnAPickedPort) {
  Registry r;
  r.GetCounter("ringcache_test_ops_total", "Ops.")->Increment(4);
  MetricsServer server;
  absl::StatusOr<int> port = server.Start(&r, "127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_GT(*port, 0);
  const std::string metrics = HttpGet(*port, "/metrics");
  EXPECT_EQ(metrics.rfind("HTTP/1.1 200", 0), 0u) << metrics;
  EXPECT_NE(metrics.find("ringcache_test_ops_total 4"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("process_open_fds"), std::string::npos) << metrics;
  const std::string health = HttpGet(*port, "/healthz");
  EXPECT_EQ(health.rfind("HTTP/1.1 200", 0), 0u) << health;
  EXPECT_NE(health.find("ringcache_healthy 1"), std::string::npos) << health;
  EXPECT_EQ(HttpGet(*port, "/nothing").rfind("HTTP/1.1 404", 0), 0u);
  server.Stop();
  EXPECT_EQ(HttpGet(*port, "/metrics"), "");
}

TEST(MetricsServerTest, StopsOnTheWildcardAddressAndTwice) {
  // Stop wakes the exposer's listener by connecting to it: for a wildcard bind, on loopback.
  Registry r;
  MetricsServer server;
  absl::StatusOr<int> port = server.Start(&r, "0.0.0.0:0");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(HttpGet(*port, "/healthz").rfind("HTTP/1.1 200", 0), 0u);
  server.Stop();
  EXPECT_EQ(HttpGet(*port, "/metrics"), "");
  server.Stop();  // idempotent
}

TEST(MetricsServerTest, BadListenAddressesAreRefused) {
  Registry r;
  MetricsServer a;
  EXPECT_TRUE(absl::IsInvalidArgument(a.Start(&r, "nohost").status()));
  MetricsServer b;
  absl::StatusOr<int> port = b.Start(&r, "127.0.0.1:0");
  ASSERT_TRUE(port.ok());
  MetricsServer c;  // the same port again: taken
  EXPECT_FALSE(c.Start(&r, "127.0.0.1:" + std::to_string(*port)).ok());
}

TEST(SplitHostPortTest, AcceptsHostPortAndRefusesTheRest) {
  std::string h;
  int p = 0;
  EXPECT_TRUE(SplitHostPort("127.0.0.1:80", &h, &p).ok());
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 80);
  EXPECT_TRUE(SplitHostPort("[::1]:9", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_FALSE(SplitHostPort("nohost", &h, &p).ok());
  EXPECT_FALSE(SplitHostPort("h:99999", &h, &p).ok());
  EXPECT_FALSE(SplitHostPort("h:x", &h, &p).ok());
}

#ifdef RINGCACHE_PROMTOOL
TEST(MetricsTest, PromtoolAcceptsRenderedOutput) {
  Registry r;
  r.GetCounter("ringcache_requests_total", "Requests served.", {{"op", "read"}})->Increment(5);
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
