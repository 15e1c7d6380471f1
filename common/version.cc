#include "common/version.h"

namespace ringcache {

const char* Version() { return RINGCACHE_VERSION; }

}  // namespace ringcache
