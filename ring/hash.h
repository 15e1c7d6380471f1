// Stable 64-bit hashes that put objects, virtual nodes and probes on the ring's hash circle.
//
// Every process (gateway, cache node, data node, simulator) must place the same object at the same
// point, on any build and any machine, so these functions fix the byte encoding of their inputs
// (little-endian, fixed width) and use XXH3-64 (libxxhash >= 0.8, whose output is frozen) with a
// distinct seed per domain. Changing any of them re-places every object in a running cluster:
// ring/testdata/golden_owners.txt pins them, and ring_test fails if they change.
//
// Thread-safety: pure functions of their arguments; safe to call from any thread.
#ifndef RINGCACHE_RING_HASH_H_
#define RINGCACHE_RING_HASH_H_

#include <cstdint>

namespace ringcache::ring {

// A physical node's identity on a ring (cache ring or data ring). Matches the uint32 node ids of
// the ringcache.v1 protos; the membership layer maps names to ids.
using NodeId = uint32_t;

// An object: all blocks of (vdi, object index) live on the same cache node and the same data
// nodes (docs/design.md §2).
struct ObjectKey {
  uint32_t vdi_id = 0;
  uint64_t object_index = 0;

  friend bool operator==(const ObjectKey&, const ObjectKey&) = default;
};

// Returns the position of object (vdi_id, object_index) on the hash circle: XXH3-64 of the 12
// bytes vdi_id (LE32) || object_index (LE64), seeded with kObjectKeySeed.
uint64_t HashObjectKey(uint32_t vdi_id, uint64_t object_index);
inline uint64_t HashObjectKey(const ObjectKey& key) {
  return HashObjectKey(key.vdi_id, key.object_index);
}

// Returns the position of virtual node number `replica` of physical node `node`: XXH3-64 of the 8
// bytes node (LE32) || replica (LE32), seeded with kVnodeSeed. A node's points depend on nothing
// but its id, so adding or removing other nodes never moves them.
uint64_t HashVnode(NodeId node, uint32_t replica);

// Returns the fixed offset of probe number `probe` (see ring.h): 0 for probe 0, so a one-probe ring
// is the classic ring; otherwise XXH3-64 of probe (LE32) seeded with kProbeSeed.
uint64_t ProbeOffset(uint32_t probe);

// Domain seeds. Part of the on-the-wire placement: never change them.
inline constexpr uint64_t kObjectKeySeed = 0x72632d6f626a6b31ULL;  // "rc-objk1"
inline constexpr uint64_t kVnodeSeed = 0x72632d766e6f6431ULL;      // "rc-vnod1"
inline constexpr uint64_t kProbeSeed = 0x72632d70726f6231ULL;      // "rc-prob1"

}  // namespace ringcache::ring

#endif  // RINGCACHE_RING_HASH_H_
