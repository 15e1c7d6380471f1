// Scatter/gather bookkeeping shared by the vectored I/O loops (socket writes, file reads): after a
// call moved `n` bytes, drop the buffers it finished and trim the one it stopped in.
#ifndef RINGCACHE_COMMON_IOVEC_H_
#define RINGCACHE_COMMON_IOVEC_H_

#include <sys/uio.h>

#include <cstddef>

namespace ringcache {

// Advances the `*count` buffers at `*iov` past `n` bytes (n <= their total length).
inline void ConsumeIov(struct iovec** iov, int* count, size_t n) {
  while (*count > 0 && n >= (*iov)->iov_len) {
    n -= (*iov)->iov_len;
    ++*iov;
    --*count;
  }
  if (*count > 0 && n > 0) {
    (*iov)->iov_base = static_cast<char*>((*iov)->iov_base) + n;
    (*iov)->iov_len -= n;
  }
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_IOVEC_H_
