// Fuzz target for what a data node reads back from its disk (datanode/store_keys.h): log record
// values under their keys (ParseLogRecord) and stored block values (DecodeBlock). Rotten bytes
// must come out as "damaged" (false / kDataLoss), never as a read past the value, a wrong length
// or data that fails its checksum.
//
// Input: byte 0 even: a log record (byte 1: the key's length, then the key, then the value);
// odd: a stored block (byte 1 picks the block size, 512 << (b % 4), then the value). Run by
// Fuzz.store_values_fuzz (common/testing/fuzz_main.cc) and by tests/fuzz/fuzz.sh.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/checksum.h"
#include "datanode/store_keys.h"
#include "common/testing/fuzz_check.h"

namespace {

using namespace ringcache::datanode;              // NOLINT: fuzzer-local brevity
using namespace ringcache::datanode::store_keys;  // NOLINT

void LogRecord(const std::string& in) {
  if (in.empty()) return;
  const size_t key_len = std::min<size_t>(static_cast<uint8_t>(in[0]) % 17, in.size() - 1);
  // Copies of exactly the right size, so that a read past them is caught (ASan).
  const std::string key = in.substr(1, key_len);
  const std::string value = in.substr(1 + key_len);
  for (bool include_data : {false, true}) {
    LogEntry e;
    uint32_t version = 0;
    const LogRead read = ParseLogRecord(key, value, include_data, &e, &version);
    if (read == LogRead::kNewer) FUZZ_CHECK(version > ringcache::kLogRecordFormat.writes);
    if (read != LogRead::kGood) continue;
    FUZZ_CHECK(key.size() == 12);
    FUZZ_CHECK(value.size() >= kLogHeader);
    const size_t header = value.size() - (include_data ? e.data.size() : 0);
    if (include_data) {
      FUZZ_CHECK(header == kLogHeader || header == kLogHeader + 8 || header == kLogHeaderV2);
      FUZZ_CHECK((header == kLogHeaderV2) == (version == 2));
      FUZZ_CHECK(ringcache::BlockChecksum(e.data) == e.checksum);
    }
    FUZZ_CHECK(LogKey(e.cache_node_id, e.sequence) == key);
  }
}

void Block(const std::string& in) {
  if (in.empty()) return;
  const uint32_t bs = 512u << (static_cast<uint8_t>(in[0]) % 4);
  const std::string value = in.substr(1);
  absl::StatusOr<StoredBlock> b = DecodeBlock(value, bs, "fuzzed block");
  if (!b.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(b.status()));
    return;
  }
  if (!b->present) {
    FUZZ_CHECK(IsTombstone(value));
    return;
  }
  FUZZ_CHECK(b->data == value.data() + 8);
  FUZZ_CHECK(value.size() >= 8 + bs);
  FUZZ_CHECK(ringcache::BlockChecksum(b->data, bs) == b->checksum);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    LogRecord(in);
  } else {
    Block(in);
  }
  return 0;
}
