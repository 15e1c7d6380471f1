// Block checksums: XXH3-64 over the block's bytes, seeded so that an all-zero block does not
// hash to a value that a zeroed header would also hold. Pure and thread-safe.
#ifndef RINGCACHE_COMMON_CHECKSUM_H_
#define RINGCACHE_COMMON_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ringcache {

inline constexpr uint64_t kChecksumSeed = 0x72696e6763616368ULL;  // "ringcach"

// Returns the checksum of `len` bytes at `data`.
uint64_t BlockChecksum(const void* data, size_t len);
inline uint64_t BlockChecksum(std::string_view s) { return BlockChecksum(s.data(), s.size()); }

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_CHECKSUM_H_
