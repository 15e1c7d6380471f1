// Readers of the public block-trace text formats ringcache-sim replays:
//
//   MSR Cambridge (SNIA IOTTA), comma-separated, 7 fields:
//     Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
//     Timestamp in Windows FILETIME (100 ns units); Type "Read"/"Write"; Offset and Size in bytes.
//     VDI key: "Hostname:DiskNumber".
//   SPC / UMass (Financial, WebSearch), comma-separated, 5 fields (extra fields ignored):
//     ASU,LBA,Size,Opcode,Timestamp
//     LBA in 512-byte sectors; Size in bytes; Opcode r/R/w/W; Timestamp in seconds (decimal).
//     VDI key: "asuN".
//   FIU (SyLab), whitespace-separated, 9 fields:
//     ts pid process lba size op major minor md5
//     ts in ns; lba in 512-byte sectors; size in 512-byte sectors; op W/R; the process name may
//     contain spaces (fields are taken from both ends). VDI key: "major:minor".
//
// VDI keys map to dense VDI ids in order of first appearance, so a trace always maps the same way.
// Blank lines and lines starting with '#' are skipped. A first line that is a column header (MSR
// or SPC files exported with one) is skipped. Any other line that does not parse is malformed:
// reported as "file:line: what was wrong", then skipped and counted, or fatal in strict mode.
//
// Thread-safety: not thread-safe; one reader per thread. The Parse* functions are pure.
#ifndef RINGCACHE_TOOLS_SIM_TEXT_FORMATS_H_
#define RINGCACHE_TOOLS_SIM_TEXT_FORMATS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/sim/byte_source.h"
#include "tools/sim/trace.h"

namespace ringcache::sim {

enum class TraceFormat { kAuto, kMsr, kSpc, kFiu, kBinary };

// Returns "auto", "msr", "spc", "fiu" or "bin".
absl::string_view TraceFormatName(TraceFormat f);
// Parses a format name as above (also "binary"). kInvalidArgument for anything else.
absl::StatusOr<TraceFormat> ParseTraceFormat(absl::string_view name);

// One parsed text line before VDI mapping and time rebasing.
struct ParsedLine {
  uint64_t time_us = 0;   // absolute, in µs, in the trace's own epoch
  absl::string_view vdi_key;  // view into the line, or into `key_buf`
  uint64_t offset = 0;    // bytes
  uint64_t length = 0;    // bytes
  Op op = Op::kRead;
  std::string key_buf;    // storage for keys that are not a substring of the line
};

// Parse one line of each format. On failure the status message says what was wrong (without
// file:line, which the reader adds).
absl::Status ParseMsrLine(absl::string_view line, ParsedLine* out);
absl::Status ParseSpcLine(absl::string_view line, ParsedLine* out);
absl::Status ParseFiuLine(absl::string_view line, ParsedLine* out);

// Guesses the format of a text line (the first non-blank, non-comment one of a file).
// kInvalidArgument if it looks like none of them.
absl::StatusOr<TraceFormat> DetectTextFormat(absl::string_view line);

struct TextReaderOptions {
  bool strict = false;          // a malformed line is an error instead of being skipped
  uint32_t max_reported = 10;   // malformed lines printed through `report` (the rest counted)
  // Receives "file:line: what" for each reported malformed line. Default: stderr.
  std::function<void(const std::string&)> report;
};

// Reads one text trace file (plain or gzip) of a known format.
class TextTraceReader : public RequestSource {
 public:
  static absl::StatusOr<std::unique_ptr<TextTraceReader>> Open(const std::string& path,
                                                               TraceFormat format,
                                                               TextReaderOptions options);

  absl::StatusOr<size_t> Read(absl::Span<Request> out) override;
  std::vector<std::string> VdiNames() const override { return names_; }
  const SourceStats& stats() const override { return stats_; }

 private:
  TextTraceReader(std::unique_ptr<LineReader> lines, TraceFormat format,
                  TextReaderOptions options);
  // Counts a malformed line and reports it ("file:line: why"); an error in strict mode.
  absl::Status Malformed(const absl::Status& why);
  absl::Status MalformedMessage(const std::string& msg);
  uint32_t VdiId(absl::string_view key);

  std::unique_ptr<LineReader> lines_;
  TraceFormat format_;
  TextReaderOptions options_;
  SourceStats stats_;
  ParsedLine parsed_;
  bool stopped_ = false;         // input unreadable past this point
  bool seen_data_line_ = false;  // a non-blank, non-comment line was seen
  bool have_base_time_ = false;
  uint64_t base_time_us_ = 0;
  absl::flat_hash_map<std::string, uint32_t> vdi_ids_;
  std::vector<std::string> names_;
  std::string last_key_;  // one-entry cache in front of vdi_ids_
  uint32_t last_id_ = 0;
  bool have_last_ = false;
};

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_TEXT_FORMATS_H_
