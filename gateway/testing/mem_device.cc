// Test-only sparse in-memory block device; see mem_device.h.
#include "gateway/testing/mem_device.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringcache::gateway::testing {
namespace {
// BlockStatus stops after this many extents; NBD lets a server describe less than asked.
constexpr size_t kMaxExtents = 1024;
}  // namespace

MemDevice::MemDevice(uint64_t size_bytes) : size_(size_bytes) {}

absl::Status MemDevice::CheckRange(uint64_t offset, uint32_t len) const {
  if (offset > size_ || len > size_ - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("range [", offset, ", +", len, ") beyond device size ", size_));
  }
  return absl::OkStatus();
}

absl::Status MemDevice::Read(uint64_t offset, uint32_t len, char* buf) {
  if (absl::Status s = CheckRange(offset, len); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  absl::ReaderMutexLock l(&mu_);
  uint64_t pos = offset;
  const uint64_t end = offset + len;
  while (pos < end) {
    const uint64_t index = pos / kBlockSize;
    const uint64_t in_block = pos % kBlockSize;
    const uint64_t n = std::min<uint64_t>(kBlockSize - in_block, end - pos);
    auto it = blocks_.find(index);
    if (it == blocks_.end() || it->second.data == nullptr) {
      std::memset(buf + (pos - offset), 0, n);
    } else {
      std::memcpy(buf + (pos - offset), it->second.data.get() + in_block, n);
    }
    pos += n;
  }
  return absl::OkStatus();
}

absl::Status MemDevice::Write(uint64_t offset, uint32_t len, const char* buf, bool fua) {
  if (absl::Status s = CheckRange(offset, len); !s.ok()) return s;
  if (fua) fua_writes_.fetch_add(1);
  absl::MutexLock l(&mu_);
  uint64_t pos = offset;
  const uint64_t end = offset + len;
  while (pos < end) {
    const uint64_t index = pos / kBlockSize;
    const uint64_t in_block = pos % kBlockSize;
    const uint64_t n = std::min<uint64_t>(kBlockSize - in_block, end - pos);
    Block& block = blocks_[index];
    if (block.data == nullptr) {
      block.data.reset(new char[kBlockSize]);
      std::memset(block.data.get(), 0, kBlockSize);
    }
    std::memcpy(block.data.get() + in_block, buf + (pos - offset), n);
    pos += n;
  }
  return absl::OkStatus();
}

void MemDevice::ZeroRangeLocked(uint64_t offset, uint64_t len, bool may_trim) {
  uint64_t pos = offset;
  const uint64_t end = offset + len;
  while (pos < end) {
    const uint64_t index = pos / kBlockSize;
    const uint64_t in_block = pos % kBlockSize;
    const uint64_t n = std::min<uint64_t>(kBlockSize - in_block, end - pos);
    // A whole block, or the export's tail block covered up to the end of the export.
    const bool whole = in_block == 0 && (n == kBlockSize || pos + n == size_);
    auto it = blocks_.find(index);
    if (whole) {
      if (may_trim) {
        if (it != blocks_.end()) blocks_.erase(it);
      } else {
        blocks_[index].data.reset();
      }
    } else if (it != blocks_.end() && it->second.data != nullptr) {
      std::memset(it->second.data.get() + in_block, 0, n);
    } else if (it == blocks_.end() && !may_trim) {
      blocks_[index].data.reset();  // provision the partial block as zeros
    }
    pos += n;
  }
}

absl::Status MemDevice::Trim(uint64_t offset, uint32_t len) {
  if (absl::Status s = CheckRange(offset, len); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  ZeroRangeLocked(offset, len, /*may_trim=*/true);
  return absl::OkStatus();
}

absl::Status MemDevice::WriteZeroes(uint64_t offset, uint32_t len, bool may_trim, bool fua) {
  if (absl::Status s = CheckRange(offset, len); !s.ok()) return s;
  if (fua) fua_writes_.fetch_add(1);
  absl::MutexLock l(&mu_);
  ZeroRangeLocked(offset, len, may_trim);
  return absl::OkStatus();
}

absl::Status MemDevice::Flush() {
  flushes_.fetch_add(1);
  return absl::OkStatus();
}

absl::Status MemDevice::Cache(uint64_t offset, uint32_t len) {
  if (absl::Status s = CheckRange(offset, len); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  caches_.fetch_add(1);
  return absl::OkStatus();
}

absl::Status MemDevice::BlockStatus(uint64_t offset, uint32_t len, std::vector<Extent>* out) {
  if (absl::Status s = CheckRange(offset, len); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  out->clear();
  absl::ReaderMutexLock l(&mu_);
  uint64_t pos = offset;
  const uint64_t end = offset + len;
  while (pos < end) {
    const uint64_t index = pos / kBlockSize;
    const uint64_t n = std::min<uint64_t>(kBlockSize - pos % kBlockSize, end - pos);
    auto it = blocks_.find(index);
    Extent e;
    e.hole = it == blocks_.end();
    e.zero = it == blocks_.end() || it->second.data == nullptr;
    if (!out->empty() && out->back().hole == e.hole && out->back().zero == e.zero) {
      out->back().length += static_cast<uint32_t>(n);
    } else {
      if (out->size() == kMaxExtents) break;
      e.length = static_cast<uint32_t>(n);
      out->push_back(e);
    }
    pos += n;
  }
  return absl::OkStatus();
}

size_t MemDevice::AllocatedBlocksForTest() const {
  absl::ReaderMutexLock l(&mu_);
  return blocks_.size();
}

std::shared_ptr<MemDevice> MemExportProvider::AddExport(const ExportInfo& info) {
  auto device = std::make_shared<MemDevice>(info.size_bytes);
  absl::MutexLock l(&mu_);
  exports_[info.name] = Entry{info, device};
  return device;
}

absl::StatusOr<ExportInfo> MemExportProvider::Find(const std::string& name) {
  absl::MutexLock l(&mu_);
  auto it = exports_.find(name);
  if (it == exports_.end()) return absl::NotFoundError(absl::StrCat("no export named '", name, "'"));
  return it->second.info;
}

std::vector<ExportInfo> MemExportProvider::List() {
  absl::MutexLock l(&mu_);
  std::vector<ExportInfo> out;
  for (const auto& [name, entry] : exports_) out.push_back(entry.info);
  return out;
}

absl::StatusOr<std::shared_ptr<BlockDevice>> MemExportProvider::Open(const std::string& name) {
  absl::MutexLock l(&mu_);
  auto it = exports_.find(name);
  if (it == exports_.end()) return absl::NotFoundError(absl::StrCat("no export named '", name, "'"));
  return std::shared_ptr<BlockDevice>(it->second.device);
}

}  // namespace ringcache::gateway::testing
