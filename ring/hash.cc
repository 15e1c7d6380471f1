// Implementation of the ring's stable hashes (see hash.h). Pure; thread-safe.
#include "ring/hash.h"

#include <xxhash.h>

#include <cstddef>

namespace ringcache::ring {
namespace {

// Writes `v` as `n` little-endian bytes at `out`, independent of the host's byte order.
void PutLittleEndian(uint64_t v, int n, unsigned char* out) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

uint64_t HashObjectKey(uint32_t vdi_id, uint64_t object_index) {
  unsigned char buf[12];
  PutLittleEndian(vdi_id, 4, buf);
  PutLittleEndian(object_index, 8, buf + 4);
  return XXH3_64bits_withSeed(buf, sizeof(buf), kObjectKeySeed);
}

uint64_t HashVnode(NodeId node, uint32_t replica) {
  unsigned char buf[8];
  PutLittleEndian(node, 4, buf);
  PutLittleEndian(replica, 4, buf + 4);
  return XXH3_64bits_withSeed(buf, sizeof(buf), kVnodeSeed);
}

uint64_t ProbeOffset(uint32_t probe) {
  if (probe == 0) return 0;
  unsigned char buf[4];
  PutLittleEndian(probe, 4, buf);
  return XXH3_64bits_withSeed(buf, sizeof(buf), kProbeSeed);
}

}  // namespace ringcache::ring
