// The version every ringcache program reports with --version: the CMake project version, which
// the top-level CMakeLists.txt passes to every compile as RINGCACHE_VERSION.
#ifndef RINGCACHE_COMMON_VERSION_H_
#define RINGCACHE_COMMON_VERSION_H_

#include <string>

namespace ringcache {

// "0.1.0".
inline const char* Version() { return RINGCACHE_VERSION; }
// "<program> <version>", the line --version prints.
inline std::string VersionLine(const std::string& program) { return program + " " + Version(); }

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_VERSION_H_
