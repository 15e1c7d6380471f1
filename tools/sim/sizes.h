// Cache-size arguments of ringcache-sim: "4096" (blocks), "1GiB" / "512MB" / "64KiB" (bytes),
// "10%" (of the trace's unique blocks, its working set).
//
// Thread-safety: pure functions.
#ifndef RINGCACHE_TOOLS_SIM_SIZES_H_
#define RINGCACHE_TOOLS_SIM_SIZES_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace ringcache::sim {

// Reports whether `text` is relative to the working set (ends in '%').
bool SizeIsRelative(absl::string_view text);

// Parses a size into blocks of `block_size` bytes. Byte sizes round down to whole blocks;
// percentages of `working_set_blocks` round to the nearest block. Errors: malformed text, or a
// result of 0 blocks.
absl::StatusOr<uint64_t> ParseCacheSize(absl::string_view text, uint32_t block_size,
                                        uint64_t working_set_blocks);

// Parses a byte count with an optional K/M/G/T suffix (KiB = 1024; KB = 1000; a bare K = 1024).
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_SIZES_H_
