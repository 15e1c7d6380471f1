// Trace file opening and format detection. See trace_io.h.
#include "tools/sim/trace_io.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tools/sim/binary_format.h"
#include "tools/sim/byte_source.h"

namespace ringcache::sim {

absl::StatusOr<TraceFormat> DetectTraceFormat(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ByteSource>> src = ByteSource::Open(path);
  if (!src.ok()) return src.status();
  if (IsBinaryTrace(path)) return TraceFormat::kBinary;
  LineReader lines(*std::move(src));
  absl::string_view line;
  while (true) {
    absl::StatusOr<bool> more = lines.Next(&line);
    if (!more.ok()) return more.status();
    if (!*more) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": empty trace (no data lines)"));
    }
    absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty() || t[0] == '#') continue;
    absl::StatusOr<TraceFormat> f = DetectTextFormat(t);
    if (!f.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", lines.line_number(), ": ", f.status().message()));
    }
    return *f;
  }
}

absl::StatusOr<std::unique_ptr<RequestSource>> OpenTraceFile(
    const std::string& path, TraceFormat format, const TextReaderOptions& text_options) {
  if (format == TraceFormat::kAuto) {
    absl::StatusOr<TraceFormat> f = DetectTraceFormat(path);
    if (!f.ok()) return f.status();
    format = *f;
  }
  if (format == TraceFormat::kBinary) {
    absl::StatusOr<std::unique_ptr<BinaryTraceReader>> r = BinaryTraceReader::Open(path);
    if (!r.ok()) return r.status();
    return std::unique_ptr<RequestSource>(std::move(*r));
  }
  absl::StatusOr<std::unique_ptr<TextTraceReader>> r =
      TextTraceReader::Open(path, format, text_options);
  if (!r.ok()) return r.status();
  return std::unique_ptr<RequestSource>(std::move(*r));
}

}  // namespace ringcache::sim
