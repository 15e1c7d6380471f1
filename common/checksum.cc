#include "common/checksum.h"

#include <xxhash.h>

namespace ringcache {

uint64_t BlockChecksum(const void* data, size_t len) {
  return XXH3_64bits_withSeed(data, len, kChecksumSeed);
}

}  // namespace ringcache
