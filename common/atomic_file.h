// WriteFileAtomically: replaces a small state file so that a crash at any moment leaves either
// the old or the new content, never a mix: write "<path>.tmp", fdatasync it, rename it over
// `path`, fsync the directory. For the node's small durable tables (VDI catalog, removed nodes,
// log sequence mark, VDI table of a cache node). ReadStateFile reads such a file back whole,
// ReadSmallFile any small file (credentials may be links), ReadPrivateFile a secret, once its
// owner and mode keep it private.
//
// Thread-safety: callers serialise writes to one path (the ".tmp" name is shared).
#ifndef RINGCACHE_COMMON_ATOMIC_FILE_H_
#define RINGCACHE_COMMON_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringcache {

// Returns kUnavailable naming the file and the system error when any step fails.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view content);

// Reads a whole small file (credentials, state). kNotFound when it does not exist, kUnavailable
// on any other error, each naming the file; kInvalidArgument past `max_bytes`.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes = 1 << 20);

// Reads a state file of a daemon's own (catalog, rings, sequence mark...) like ReadSmallFile,
// but never through a symbolic link: a link is kFailedPrecondition naming the file. Writes
// (WriteFileAtomically) never follow one either: the new file replaces the link.
absl::StatusOr<std::string> ReadStateFile(const std::string& path, size_t max_bytes = 64 << 20);

// Reads a secret (a private key, a PSK file) like ReadSmallFile, after checking what protects
// it: a regular file owned by this process's user with no permission for group or others (0600
// or 0400). Anything else is refused with kPermissionDenied naming the file, its mode and owner,
// and the fix (`chmod 600`), as ssh refuses a key others can read.
absl::StatusOr<std::string> ReadPrivateFile(const std::string& path, size_t max_bytes = 1 << 20);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_ATOMIC_FILE_H_
