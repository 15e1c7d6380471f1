// Fuzz target for the values ringcache reads from etcd (docs/design.md, "etcd layout"): VDI
// catalog records, node records (JSON), the cache ring's state, ring epochs and the data ring
// (protobuf text). Anyone who can write to etcd, or a torn or hand-edited value, gets an error
// naming what is wrong, never a crash; what decodes encodes back to a value that decodes the
// same.
//
// Input: byte 0 picks the decoder (mod 5), the rest is the value. Run by Fuzz.etcd_values_fuzz
// (common/testing/fuzz_main.cc) and by tests/fuzz/fuzz.sh.
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "coordinator/catalog.h"
#include "datanode/client/datanode_pool.h"
#include "membership/cache_ring_state.h"
#include "membership/membership.h"
#include "common/testing/fuzz_check.h"

namespace {

using namespace ringcache;  // NOLINT: fuzzer-local brevity

void VdiLine(const std::string& v) {
  auto r = coordinator::DecodeVdiLine(v);
  if (!r.ok()) return;
  const std::string line = coordinator::EncodeVdiLine(*r);
  auto back = coordinator::DecodeVdiLine(line);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(coordinator::EncodeVdiLine(*back) == line);
}

void NodeRecord(const std::string& v) {
  auto r = membership::DecodeNodeRecord(v);
  if (!r.ok()) return;
  FUZZ_CHECK(r->Validate().ok());
  auto back = membership::DecodeNodeRecord(membership::EncodeNodeRecord(*r));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == *r);
}

void CacheRing(const std::string& v) {
  auto s = membership::DecodeCacheRingState(v);
  if (!s.ok()) return;
  auto back = membership::DecodeCacheRingState(membership::EncodeCacheRingState(*s));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == *s);
}

void RingEpoch(const std::string& v) {
  auto e = membership::DecodeRingEpoch(v);
  if (!e.ok()) return;
  auto back = membership::DecodeRingEpoch(membership::EncodeRingEpoch(*e));
  FUZZ_CHECK(back.ok() && *back == *e);
}

void DataRing(const std::string& v) {
  auto r = datanode::DecodeDataRing(v);
  if (!r.ok()) return;
  FUZZ_CHECK(r->Validate().ok());
  const std::string text = datanode::EncodeDataRing(*r);
  auto back = datanode::DecodeDataRing(text);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(datanode::EncodeDataRing(*back) == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The text parser logs every error it finds; a fuzz run finds millions.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const std::string v(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      VdiLine(v);
      break;
    case 1:
      NodeRecord(v);
      break;
    case 2:
      CacheRing(v);
      break;
    case 3:
      RingEpoch(v);
      break;
    default:
      DataRing(v);
      break;
  }
  return 0;
}
