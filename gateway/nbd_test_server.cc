// nbd-test-server: TEST-ONLY. Serves in-memory exports (gateway/testing/mem_device.h) through the
// real NbdServer so that real NBD clients (qemu-img, qemu-io, nbdinfo, nbdcopy, fio) and the
// bad-input tests can exercise the NBD front end without cache nodes. Data lives in RAM and is
// lost on exit. It is not installed and is not part of the product (ringcache-gateway is).
//
//   nbd-test-server --listen 127.0.0.1:0 --export disk:64M --export small:1M:4096
//                   --ready-file /tmp/ready.json [--http-listen 127.0.0.1:0]
//
// --export NAME:SIZE[:MIN_BLOCK] (SIZE takes K/M/G suffixes; MIN_BLOCK defaults to 512). Once
// serving it writes {"nbd_port":N,"http_port":M,"pid":P} to the ready file (http_port is 0
// without --http-listen). SIGINT/SIGTERM stop it gracefully (exit 0); bad arguments exit 2.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/daemon.h"
#include "common/metrics.h"
#include "common/socket.h"
#include "gateway/nbd_server.h"
#include "gateway/testing/mem_device.h"

namespace {

using ringcache::gateway::ExportInfo;

bool ParseSize(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  uint64_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      mult = 1ull << 10;
      break;
    case 'M':
    case 'm':
      mult = 1ull << 20;
      break;
    case 'G':
    case 'g':
      mult = 1ull << 30;
      break;
    default:
      break;
  }
  if (mult != 1) digits.pop_back();
  uint64_t v = 0;
  if (!absl::SimpleAtoi(digits, &v) || v > (~0ull) / mult) return false;
  *out = v * mult;
  return true;
}

// Parses NAME:SIZE[:MIN_BLOCK].
bool ParseExport(const std::string& spec, ExportInfo* info, std::string* error) {
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty()) {
    *error = absl::StrCat("--export '", spec, "': expected NAME:SIZE[:MIN_BLOCK]");
    return false;
  }
  info->name = parts[0];
  info->description = absl::StrCat("in-memory test export ", parts[0]);
  if (!ParseSize(parts[1], &info->size_bytes) || info->size_bytes == 0) {
    *error = absl::StrCat("--export '", spec, "': bad size '", parts[1], "'");
    return false;
  }
  if (parts.size() == 3) {
    uint32_t min_block = 0;
    if (!absl::SimpleAtoi(parts[2], &min_block) || min_block == 0 ||
        (min_block & (min_block - 1)) != 0 || min_block > 65536) {
      *error = absl::StrCat("--export '", spec, "': MIN_BLOCK must be a power of two <= 65536");
      return false;
    }
    info->min_block = min_block;
    if (info->preferred_block < min_block) info->preferred_block = min_block;
  }
  if (info->size_bytes % info->min_block != 0) {
    *error = absl::StrCat("--export '", spec, "': size must be a multiple of ", info->min_block);
    return false;
  }
  return true;
}

bool WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << content)) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nbd-test-server: TEST-ONLY NBD server over in-memory exports (not the product)."};
  ringcache::gateway::NbdServerConfig config;
  config.listen = "127.0.0.1:0";
  std::vector<std::string> export_specs;
  std::string ready_file, http_listen;
  bool verbose = false;
  app.add_option("--listen", config.listen, "NBD address host:port (port 0 picks one)");
  app.add_option("--export", export_specs, "NAME:SIZE[:MIN_BLOCK], repeatable")->required();
  app.add_option("--ready-file", ready_file, "Write {\"nbd_port\":..} here once serving");
  app.add_option("--http-listen", http_listen, "Serve /metrics on host:port");
  app.add_option("--max-connections", config.max_connections, "Connection limit");
  app.add_option("--workers", config.worker_threads, "Worker threads");
  app.add_option("--max-inflight-requests", config.max_inflight_requests,
                 "Per-connection request limit");
  app.add_option("--max-inflight-bytes", config.max_inflight_bytes, "Per-connection byte limit");
  app.add_option("--handshake-timeout-ms", config.handshake_timeout_ms, "Handshake deadline");
  app.add_flag("--verbose", verbose, "Log every rejected request");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (verbose) spdlog::set_level(spdlog::level::debug);
  if (absl::Status s = config.Validate(); !s.ok()) {
    std::fprintf(stderr, "nbd-test-server: %s\n", s.ToString().c_str());
    return 2;
  }
  ringcache::gateway::testing::MemExportProvider provider;
  for (const std::string& spec : export_specs) {
    ExportInfo info;
    std::string error;
    if (!ParseExport(spec, &info, &error)) {
      std::fprintf(stderr, "nbd-test-server: %s\n", error.c_str());
      return 2;
    }
    provider.AddExport(info);
  }

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ringcache::metrics::Registry* registry = ringcache::metrics::Registry::Default();
  ringcache::gateway::NbdServer server(config, &provider, registry);
  absl::StatusOr<int> port = server.Start();
  if (!port.ok()) {
    std::fprintf(stderr, "nbd-test-server: %s\n", port.status().ToString().c_str());
    return 1;
  }
  ringcache::MetricsServer http;
  int http_port = 0;
  if (!http_listen.empty()) {
    absl::StatusOr<int> bound = http.Start(registry, http_listen);
    if (!bound.ok()) {
      std::fprintf(stderr, "nbd-test-server: --http-listen: %s\n",
                   bound.status().ToString().c_str());
      return absl::IsInvalidArgument(bound.status()) ? 2 : 1;
    }
    http_port = *bound;
  }
  if (!ready_file.empty() &&
      !WriteFileAtomically(ready_file, absl::StrCat("{\"nbd_port\":", *port, ",\"http_port\":",
                                                    http_port, ",\"pid\":", getpid(), "}\n"))) {
    std::fprintf(stderr, "nbd-test-server: cannot write %s\n", ready_file.c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&sigs, &sig);
  spdlog::info("nbd-test-server: signal {}, stopping", sig);
  http.Stop();
  server.Stop();
  return 0;
}
