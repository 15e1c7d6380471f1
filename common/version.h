// The version every ringcache program reports with --version: the CMake project version (compiled
// into version.cc alone, as RINGCACHE_VERSION), and the versions of the formats it writes and
// reads.
#ifndef RINGCACHE_COMMON_VERSION_H_
#define RINGCACHE_COMMON_VERSION_H_

#include <string>

#include "common/formats.h"

namespace ringcache {

// The release, e.g. "0.2.0".
const char* Version();
// What --version prints: "<program> <version>", then the formats it writes and reads
// (common/formats.h).
inline std::string VersionLine(const std::string& program) {
  return program + " " + Version() + "\n" + FormatsLine();
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_VERSION_H_
