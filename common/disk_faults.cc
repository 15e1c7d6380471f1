// Injected disk faults for fault tests: see disk_faults.h.
#include "common/disk_faults.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <utility>

namespace ringcache {

DiskFaults ReadDiskFaults(const std::string& path) {
  DiskFaults f;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("sync_delay_ms=", 0) == 0) f.sync_delay_ms = std::atoi(line.c_str() + 14);
    if (line == "full=1") f.full = true;
  }
  return f;
}

DiskFaultsWatcher::DiskFaultsWatcher(std::string path,
                                     std::function<void(const DiskFaults&)> apply)
    : path_(std::move(path)), apply_(std::move(apply)) {
  spdlog::warn("disk faults injected from {} (a fault-test seam)", path_);
  apply_(last_);
  Poll();
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Poll();
    }
  });
}

DiskFaultsWatcher::~DiskFaultsWatcher() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void DiskFaultsWatcher::Poll() {
  const DiskFaults now = ReadDiskFaults(path_);
  if (now == last_) return;
  spdlog::warn("injected disk faults ({}): sync delay {} ms, full disk {}", path_,
               now.sync_delay_ms, now.full ? "yes" : "no");
  last_ = now;
  apply_(now);
}

absl::Status DiskFaultFile::PWrite(const void* buf, size_t len, uint64_t off) {
  if (cell_->full.load()) return absl::ResourceExhaustedError("injected: no space left on device");
  return base_->PWrite(buf, len, off);
}

absl::Status DiskFaultFile::Sync() {
  if (const int ms = cell_->sync_delay_ms.load(); ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  if (cell_->full.load()) return absl::ResourceExhaustedError("injected: no space left on device");
  return base_->Sync();
}

}  // namespace ringcache
