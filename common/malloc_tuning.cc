// KeepFreedMemoryForReuse: see malloc_tuning.h.
#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringcache {

std::string KeepFreedMemoryForReuse(int arenas) {
  const char* env = std::getenv("GLIBC_TUNABLES");
  if (env != nullptr && std::strstr(env, "glibc.malloc.") != nullptr) {
    return "malloc: as GLIBC_TUNABLES sets it";
  }
  // mallopt returns 1 on success. A fixed mmap threshold also stops glibc from moving it (and
  // the trim threshold with it) as mapped blocks are freed. 32 MiB is the largest it accepts
  // on 64-bit.
  const bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 &&
                  (arenas <= 0 || mallopt(M_ARENA_MAX, arenas) == 1);
  if (!ok) return "malloc: the allocator refused the reuse settings; its defaults stay";
  std::string line = "malloc: blocks up to 32 MiB from the heap, freed memory kept for reuse";
  if (arenas > 0) absl::StrAppend(&line, ", ", arenas, " arenas");
  return line;
}

}  // namespace ringcache
