// Opening a trace file of any supported format: detects the binary magic (also inside gzip),
// else guesses the text format from the first data line, unless the caller names the format.
//
// Thread-safety: pure functions returning independent sources.
#ifndef RINGCACHE_TOOLS_SIM_TRACE_IO_H_
#define RINGCACHE_TOOLS_SIM_TRACE_IO_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/sim/text_formats.h"
#include "tools/sim/trace.h"

namespace ringcache::sim {

// Returns the format of the file at `path` (binary by magic, else text by its first line).
absl::StatusOr<TraceFormat> DetectTraceFormat(const std::string& path);

// Opens `path` as `format` (kAuto: detect). `text_options` applies to text formats.
absl::StatusOr<std::unique_ptr<RequestSource>> OpenTraceFile(const std::string& path,
                                                             TraceFormat format,
                                                             const TextReaderOptions& text_options);

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_TRACE_IO_H_
