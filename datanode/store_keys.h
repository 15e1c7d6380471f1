// Big-endian key and value encoding of the data node's store (datanode/store.h): integers are
// written most significant byte first, so RocksDB's bytewise order is numeric order. Internal to
// the store's files.
//
// Thread-safety: stateless functions.
#ifndef RINGCACHE_DATANODE_STORE_KEYS_H_
#define RINGCACHE_DATANODE_STORE_KEYS_H_

#include <cstdint>
#include <string>

namespace ringcache::datanode::store_keys {

inline void PutBe32(std::string* s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
inline void PutBe64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (i * 8)) & 0xff));
}
// `prefix` followed by `id` (a node, writer or VDI id): the meta keys kept per id.
inline std::string IdKey(const char* prefix, uint32_t id) {
  std::string k = prefix;
  PutBe32(&k, id);
  return k;
}
inline uint64_t GetBe(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace ringcache::datanode::store_keys

#endif  // RINGCACHE_DATANODE_STORE_KEYS_H_
