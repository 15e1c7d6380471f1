// FUZZ_CHECK(cond): a fuzz target's own invariant (a round trip that must hold, a size that must
// stay in bounds). A failure aborts, so the fuzz driver (fuzz_main.cc) or libFuzzer keeps the
// input that broke it; it is checked in release builds too, unlike assert().
#ifndef RINGCACHE_COMMON_TESTING_FUZZ_CHECK_H_
#define RINGCACHE_COMMON_TESTING_FUZZ_CHECK_H_

#include <cstdlib>

#define FUZZ_CHECK(cond)  \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

#endif  // RINGCACHE_COMMON_TESTING_FUZZ_CHECK_H_
