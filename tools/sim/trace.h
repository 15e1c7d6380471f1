// Vocabulary of ringcache-sim's trace layer: one I/O request as read from a trace or made by a
// generator, the interface every request source implements, and the counters a source keeps.
//
// A Request is in bytes (offset, length), not yet split into cache blocks: the runner splits it
// with the block size of the run, so one trace file serves every block size.
//
// Thread-safety: RequestSource objects are not thread-safe; one thread drives one source. Distinct
// sources share nothing and may be used from different threads.
#ifndef RINGCACHE_TOOLS_SIM_TRACE_H_
#define RINGCACHE_TOOLS_SIM_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "cachenode/policy/types.h"

namespace ringcache::sim {

using policy::Op;

// One I/O request. `time_us` is relative to the trace's first request (readers subtract it).
struct Request {
  uint64_t time_us = 0;
  uint64_t offset = 0;  // bytes
  uint32_t length = 0;  // bytes, > 0
  uint32_t vdi = 0;     // dense VDI id (see VdiNames)
  Op op = Op::kRead;
};

// Counters a source keeps while it reads.
struct SourceStats {
  uint64_t lines = 0;          // text lines read (text formats only)
  uint64_t requests = 0;       // requests handed out
  uint64_t malformed = 0;      // lines skipped because they did not parse
  std::string first_error;     // "file:line: what" of the first malformed line
};

// A stream of requests. Implementations: text readers (MSR, SPC, FIU), the binary reader, the
// synthetic generators, and the timestamp merge of several generators.
class RequestSource {
 public:
  virtual ~RequestSource() = default;

  // Fills the front of `out` with the next requests and returns how many it wrote; 0 means the end
  // of the stream. Errors: I/O failures, and malformed input when the source is strict.
  virtual absl::StatusOr<size_t> Read(absl::Span<Request> out) = 0;

  // Returns the display names of the VDI ids seen so far (index = VDI id; may be shorter than the
  // largest id, and entries may be empty). Complete once Read() has returned 0.
  virtual std::vector<std::string> VdiNames() const { return {}; }

  virtual const SourceStats& stats() const = 0;
};

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_TRACE_H_
