// WriteFileAtomically: replaces a small state file so that a crash at any moment leaves either
// the old or the new content, never a mix: write "<path>.tmp", fdatasync it, rename it over
// `path`, fsync the directory. For the node's small durable tables (VDI catalog, removed nodes,
// log sequence mark, VDI table of a cache node).
//
// Thread-safety: callers serialise writes to one path (the ".tmp" name is shared).
#ifndef RINGCACHE_COMMON_ATOMIC_FILE_H_
#define RINGCACHE_COMMON_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringcache {

// Returns kUnavailable naming the file and the system error when any step fails.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view content);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_ATOMIC_FILE_H_
