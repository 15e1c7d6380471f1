// ringcache-rot-store: a test tool that rots bytes in a stopped data node's store, as a disk
// can (the fault checker's rot nemesis, tests/e2e/scrub_test.sh). It flips one data byte of
// --blocks random stored blocks and --log-records random log records (their checksums stay, so
// every read of them fails its check) and prints each as a JSON line:
//   {"block":{"vdi":1,"object":3,"block":7}}   {"log":{"cache_node":2,"sequence":41}}
// The data node must not run (RocksDB's lock would refuse the open).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "datanode/store.h"

namespace {

using ringcache::datanode::BlockStore;
using ringcache::datanode::LogEntry;
using ringcache::datanode::ScannedBlock;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringcache-rot-store: flip bytes in a stopped data node's blocks and log records "
               "(test tool)"};
  std::string dir;
  int blocks = 0, records = 0;
  uint64_t seed = 1;
  std::vector<uint32_t> writers = {1, 2, 3, 4, 5, 6, 7, 8};
  app.add_option("--data-dir", dir, "The data node's RocksDB directory")->required();
  app.add_option("--blocks", blocks, "Stored blocks to damage (tombstones are skipped)");
  app.add_option("--log-records", records, "Log records to damage");
  app.add_option("--seed", seed, "Random seed");
  app.add_option("--cache-nodes", writers, "Cache node ids whose log records may be damaged");
  CLI11_PARSE(app, argc, argv);

  auto store = BlockStore::Open({dir, 8 << 20});
  if (!store.ok()) {
    std::fprintf(stderr, "ringcache-rot-store: %s\n", store.status().ToString().c_str());
    return 1;
  }
  std::mt19937_64 rng(seed);
  // Every stored block (not tombstones).
  std::vector<ScannedBlock> all;
  ScannedBlock next;
  bool done = false;
  uint32_t vdi = 0, block = 0;
  uint64_t object = 0;
  do {
    auto page = (*store)->ScanBlocks(vdi, object, block, 4096, false, &next, &done);
    if (!page.ok()) {
      std::fprintf(stderr, "ringcache-rot-store: %s\n", page.status().ToString().c_str());
      return 1;
    }
    for (auto& b : *page) {
      if (!b.trimmed) all.push_back(b);
    }
    vdi = next.vdi_id;
    object = next.object_index;
    block = next.block_index;
  } while (!done);
  std::shuffle(all.begin(), all.end(), rng);
  for (int i = 0; i < blocks && i < static_cast<int>(all.size()); ++i) {
    const ScannedBlock& b = all[i];
    if (auto s = (*store)->DamageBlockForTest(b.vdi_id, b.object_index, b.block_index); !s.ok()) {
      std::fprintf(stderr, "ringcache-rot-store: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("{\"block\":{\"vdi\":%u,\"object\":%lu,\"block\":%u}}\n", b.vdi_id,
                static_cast<unsigned long>(b.object_index), b.block_index);
  }
  std::vector<LogEntry> log;
  for (uint32_t w : writers) {
    uint64_t from = 0;
    do {
      auto page = (*store)->LogScan(w, from, 4096, false, &from, &done);
      if (!page.ok()) break;
      log.insert(log.end(), page->begin(), page->end());
    } while (!done);
  }
  std::shuffle(log.begin(), log.end(), rng);
  for (int i = 0; i < records && i < static_cast<int>(log.size()); ++i) {
    const LogEntry& e = log[i];
    if (auto s = (*store)->DamageLogRecordForTest(e.cache_node_id, e.sequence); !s.ok()) {
      std::fprintf(stderr, "ringcache-rot-store: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("{\"log\":{\"cache_node\":%u,\"sequence\":%lu}}\n", e.cache_node_id,
                static_cast<unsigned long>(e.sequence));
  }
  return 0;
}
