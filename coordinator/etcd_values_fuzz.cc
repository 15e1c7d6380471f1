// Fuzz target for the values ringcache reads from etcd (docs/design.md, "etcd layout"): VDI
// catalog records, node records (JSON), the cache ring's state, ring epochs and the data ring
// (protobuf text), each in both versions of etcd-value (text, and the EtcdValue message of
// membership/etcd_value.h). Anyone who can write to etcd, or a torn or hand-edited value, gets an error
// naming what is wrong, never a crash; what decodes encodes back to a value that decodes the
// same.
//
// Input: byte 0 picks the decoder (mod 5), the rest is the value. Run by Fuzz.etcd_values_fuzz
// (common/testing/fuzz_main.cc) and by tests/fuzz/fuzz.sh.
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/formats.h"
#include "common/testing/fuzz_check.h"
#include "coordinator/catalog.h"
#include "datanode/client/datanode_pool.h"
#include "membership/cache_ring_state.h"
#include "membership/etcd_value.h"
#include "membership/membership.h"

namespace {

using namespace ringcache;  // NOLINT: fuzzer-local brevity

// Round trips in the version the value came in: text (etcd-value 1) back through text, an
// EtcdValue back through an EtcdValue.
membership::ScopedClusterFeatureLevel LevelOf(const std::string& v) {
  return membership::ScopedClusterFeatureLevel(
      membership::IsEtcdValue(v) ? membership::kEtcdValueFeatureLevel : kBaseFeatureLevel);
}

void VdiLine(const std::string& v) {
  auto r = coordinator::DecodeVdiValue(v);
  if (!r.ok()) return;
  auto level = LevelOf(v);
  const std::string value = coordinator::EncodeVdiValue(*r);
  auto back = coordinator::DecodeVdiValue(value);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(coordinator::EncodeVdiValue(*back) == value);
}

void NodeRecord(const std::string& v) {
  auto r = membership::DecodeNodeRecord(v);
  if (!r.ok()) return;
  FUZZ_CHECK(r->Validate().ok());
  auto level = LevelOf(v);
  auto back = membership::DecodeNodeRecord(membership::EncodeNodeValue(*r));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == *r);
}

void CacheRing(const std::string& v) {
  auto s = membership::DecodeCacheRingState(v);
  if (!s.ok()) return;
  auto level = LevelOf(v);
  auto back = membership::DecodeCacheRingState(membership::EncodeCacheRingValue(*s));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == *s);
}

void RingEpoch(const std::string& v) {
  auto e = membership::DecodeRingEpoch(v);
  if (!e.ok()) return;
  auto level = LevelOf(v);
  auto back = membership::DecodeRingEpoch(membership::EncodeNumberValue(*e, true));
  FUZZ_CHECK(back.ok() && *back == *e);
}

void DataRing(const std::string& v) {
  auto r = datanode::DecodeDataRingValue(v);
  if (!r.ok()) return;
  FUZZ_CHECK(r->Validate().ok());
  auto level = LevelOf(v);
  const std::string value = datanode::EncodeDataRingValue(*r);
  auto back = datanode::DecodeDataRingValue(value);
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(datanode::EncodeDataRingValue(*back) == value);
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
