// MSR, SPC and FIU line parsers and the text trace reader. See text_formats.h.
#include "tools/sim/text_formats.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringcache::sim {
namespace {

constexpr uint64_t kSector = 512;
// Largest request length a Request (and the binary format, which keeps the op in bit 31) holds.
constexpr uint64_t kMaxLength = (uint64_t{1} << 31) - 1;

// Splits `line` at `sep` into at most `max` fields; returns the count (more than `max` fields
// return max + 1 so callers can tell).
size_t SplitFields(absl::string_view line, char sep, absl::string_view* fields, size_t max) {
  size_t n = 0;
  size_t start = 0;
  while (true) {
    size_t pos = line.find(sep, start);
    absl::string_view f =
        line.substr(start, pos == absl::string_view::npos ? absl::string_view::npos : pos - start);
    if (n == max) return max + 1;
    fields[n++] = absl::StripAsciiWhitespace(f);
    if (pos == absl::string_view::npos) return n;
    start = pos + 1;
  }
}

// Splits on runs of spaces/tabs, no empty fields.
size_t SplitWhitespace(absl::string_view line, absl::string_view* fields, size_t max) {
  size_t n = 0;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (n == max) return max + 1;
    fields[n++] = line.substr(i, j - i);
    i = j;
  }
  return n;
}

absl::Status ParseU64(absl::string_view field, absl::string_view what, uint64_t* out) {
  if (!absl::SimpleAtoi(field, out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not a non-negative integer: '", field, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckLength(uint64_t length) {
  if (length == 0) return absl::InvalidArgumentError("request size is 0");
  if (length > kMaxLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("request size ", length, " bytes exceeds the 2 GiB limit"));
  }
  return absl::OkStatus();
}

absl::Status CheckOffset(uint64_t offset, uint64_t length) {
  if (offset > std::numeric_limits<uint64_t>::max() - length) {
    return absl::InvalidArgumentError("offset + size overflows 64 bits");
  }
  return absl::OkStatus();
}

bool LooksNumeric(absl::string_view f) {
  f = absl::StripAsciiWhitespace(f);
  return !f.empty() && (absl::ascii_isdigit(f[0]) || f[0] == '.' || f[0] == '-' || f[0] == '+');
}

}  // namespace

absl::string_view TraceFormatName(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAuto:
      return "auto";
    case TraceFormat::kMsr:
      return "msr";
    case TraceFormat::kSpc:
      return "spc";
    case TraceFormat::kFiu:
      return "fiu";
    case TraceFormat::kBinary:
      return "bin";
  }
  return "?";
}

absl::StatusOr<TraceFormat> ParseTraceFormat(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(name);
  if (n == "auto") return TraceFormat::kAuto;
  if (n == "msr") return TraceFormat::kMsr;
  if (n == "spc" || n == "umass") return TraceFormat::kSpc;
  if (n == "fiu") return TraceFormat::kFiu;
  if (n == "bin" || n == "binary") return TraceFormat::kBinary;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown trace format '", name, "' (want auto, msr, spc, fiu or bin)"));
}

absl::Status ParseMsrLine(absl::string_view line, ParsedLine* out) {
  absl::string_view f[8];
  size_t n = SplitFields(line, ',', f, 7);
  if (n != 7) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected 7 comma-separated fields, got ", n > 7 ? std::string("more") : absl::StrCat(n)));
  }
  uint64_t filetime = 0;
  RC_RETURN_IF_ERROR(ParseU64(f[0], "Timestamp", &filetime));
  uint64_t disk = 0;
  RC_RETURN_IF_ERROR(ParseU64(f[2], "DiskNumber", &disk));
  if (absl::EqualsIgnoreCase(f[3], "Read")) {
    out->op = Op::kRead;
  } else if (absl::EqualsIgnoreCase(f[3], "Write")) {
    out->op = Op::kWrite;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("Type must be Read or Write, got '", f[3], "'"));
  }
  RC_RETURN_IF_ERROR(ParseU64(f[4], "Offset", &out->offset));
  RC_RETURN_IF_ERROR(ParseU64(f[5], "Size", &out->length));
  RC_RETURN_IF_ERROR(CheckLength(out->length));
  RC_RETURN_IF_ERROR(CheckOffset(out->offset, out->length));
  if (f[1].empty()) return absl::InvalidArgumentError("Hostname is empty");
  out->time_us = filetime / 10;  // FILETIME counts 100 ns
  out->key_buf.assign(f[1].data(), f[1].size());
  out->key_buf.push_back(':');
  out->key_buf.append(f[2].data(), f[2].size());
  out->vdi_key = out->key_buf;
  return absl::OkStatus();
}

absl::Status ParseSpcLine(absl::string_view line, ParsedLine* out) {
  absl::string_view f[17];
  size_t n = SplitFields(line, ',', f, 16);
  if (n < 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 5 comma-separated fields, got ", n));
  }
  uint64_t asu = 0;
  RC_RETURN_IF_ERROR(ParseU64(f[0], "ASU", &asu));
  uint64_t lba = 0;
  RC_RETURN_IF_ERROR(ParseU64(f[1], "LBA", &lba));
  RC_RETURN_IF_ERROR(ParseU64(f[2], "Size", &out->length));
  RC_RETURN_IF_ERROR(CheckLength(out->length));
  if (f[3].size() == 1 && (f[3][0] == 'r' || f[3][0] == 'R')) {
    out->op = Op::kRead;
  } else if (f[3].size() == 1 && (f[3][0] == 'w' || f[3][0] == 'W')) {
    out->op = Op::kWrite;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Opcode must be R or W, got '", f[3], "'"));
  }
  double seconds = 0;
  if (!absl::SimpleAtod(f[4], &seconds) || !std::isfinite(seconds) || seconds < 0 ||
      seconds > 1.8e13) {
    return absl::InvalidArgumentError(
        absl::StrCat("Timestamp is not a non-negative number of seconds: '", f[4], "'"));
  }
  if (lba > std::numeric_limits<uint64_t>::max() / kSector) {
    return absl::InvalidArgumentError("LBA overflows 64-bit byte offset");
  }
  out->offset = lba * kSector;
  RC_RETURN_IF_ERROR(CheckOffset(out->offset, out->length));
  out->time_us = static_cast<uint64_t>(std::llround(seconds * 1e6));
  out->key_buf.assign("asu");
  out->key_buf.append(f[0].data(), f[0].size());
  out->vdi_key = out->key_buf;
  return absl::OkStatus();
}

absl::Status ParseFiuLine(absl::string_view line, ParsedLine* out) {
  // ts pid process... lba size op major minor md5; the process name may contain spaces.
  absl::string_view f[65];
  size_t n = SplitWhitespace(line, f, 64);
  if (n < 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 9 whitespace-separated fields, got ", n));
  }
  if (n > 64) return absl::InvalidArgumentError("too many fields");
  uint64_t ts_ns = 0;
  RC_RETURN_IF_ERROR(ParseU64(f[0], "ts", &ts_ns));
  uint64_t pid = 0;
  RC_RETURN_IF_ERROR(ParseU64(f[1], "pid", &pid));
  const absl::string_view* tail = f + n - 6;  // lba size op major minor md5
  uint64_t lba = 0, sectors = 0, major = 0, minor = 0;
  RC_RETURN_IF_ERROR(ParseU64(tail[0], "lba", &lba));
  RC_RETURN_IF_ERROR(ParseU64(tail[1], "size", &sectors));
  if (tail[2] == "R" || tail[2] == "r") {
    out->op = Op::kRead;
  } else if (tail[2] == "W" || tail[2] == "w") {
    out->op = Op::kWrite;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("op must be R or W, got '", tail[2], "'"));
  }
  RC_RETURN_IF_ERROR(ParseU64(tail[3], "major", &major));
  RC_RETURN_IF_ERROR(ParseU64(tail[4], "minor", &minor));
  if (lba > std::numeric_limits<uint64_t>::max() / kSector ||
      sectors > std::numeric_limits<uint64_t>::max() / kSector) {
    return absl::InvalidArgumentError("lba or size overflows a 64-bit byte count");
  }
  out->offset = lba * kSector;
  out->length = sectors * kSector;
  RC_RETURN_IF_ERROR(CheckLength(out->length));
  RC_RETURN_IF_ERROR(CheckOffset(out->offset, out->length));
  out->time_us = ts_ns / 1000;
  out->key_buf.assign(tail[3].data(), tail[3].size());
  out->key_buf.push_back(':');
  out->key_buf.append(tail[4].data(), tail[4].size());
  out->vdi_key = out->key_buf;
  return absl::OkStatus();
}

absl::StatusOr<TraceFormat> DetectTextFormat(absl::string_view line) {
  ParsedLine p;
  if (line.find(',') != absl::string_view::npos) {
    if (ParseMsrLine(line, &p).ok()) return TraceFormat::kMsr;
    if (ParseSpcLine(line, &p).ok()) return TraceFormat::kSpc;
    // A header line: decide by its column count.
    absl::string_view f[17];
    size_t n = SplitFields(line, ',', f, 16);
    if (n == 7 && !LooksNumeric(f[0])) return TraceFormat::kMsr;
    if (n == 5 && !LooksNumeric(f[0])) return TraceFormat::kSpc;
  } else if (ParseFiuLine(line, &p).ok()) {
    return TraceFormat::kFiu;
  }
  std::string shown(line.substr(0, 80));
  return absl::InvalidArgumentError(
      absl::StrCat("cannot tell the trace format from its first line '", shown,
                   "'; pass --format msr|spc|fiu|bin"));
}

absl::StatusOr<std::unique_ptr<TextTraceReader>> TextTraceReader::Open(
    const std::string& path, TraceFormat format, TextReaderOptions options) {
  if (format != TraceFormat::kMsr && format != TraceFormat::kSpc &&
      format != TraceFormat::kFiu) {
    return absl::InvalidArgumentError("TextTraceReader needs msr, spc or fiu");
  }
  absl::StatusOr<std::unique_ptr<ByteSource>> src = ByteSource::Open(path);
  if (!src.ok()) return src.status();
  auto lines = std::make_unique<LineReader>(*std::move(src));
  return std::unique_ptr<TextTraceReader>(
      new TextTraceReader(std::move(lines), format, std::move(options)));
}

TextTraceReader::TextTraceReader(std::unique_ptr<LineReader> lines, TraceFormat format,
                                 TextReaderOptions options)
    : lines_(std::move(lines)), format_(format), options_(std::move(options)) {
  if (!options_.report) {
    options_.report = [](const std::string& msg) { std::cerr << msg << "\n"; };
  }
}

absl::Status TextTraceReader::Malformed(const absl::Status& why) {
  return MalformedMessage(
      absl::StrCat(lines_->path(), ":", lines_->line_number(), ": ", why.message()));
}

absl::Status TextTraceReader::MalformedMessage(const std::string& msg) {
  ++stats_.malformed;
  if (stats_.first_error.empty()) stats_.first_error = msg;
  if (options_.strict) return absl::InvalidArgumentError(msg);
  if (stats_.malformed <= options_.max_reported) {
    options_.report(absl::StrCat("warning: ", msg, " (line skipped)"));
  } else if (stats_.malformed == options_.max_reported + 1) {
    options_.report("warning: more malformed lines; counting them silently");
  }
  return absl::OkStatus();
}

uint32_t TextTraceReader::VdiId(absl::string_view key) {
  if (have_last_ && key == last_key_) return last_id_;
  auto [it, inserted] = vdi_ids_.try_emplace(std::string(key), names_.size());
  if (inserted) names_.emplace_back(key);
  last_key_.assign(key.data(), key.size());
  last_id_ = it->second;
  have_last_ = true;
  return last_id_;
}

absl::StatusOr<size_t> TextTraceReader::Read(absl::Span<Request> out) {
  size_t n = 0;
  absl::string_view line;
  while (n < out.size() && !stopped_) {
    absl::StatusOr<bool> more = lines_->Next(&line);
    if (!more.ok()) {
      if (options_.strict) return more.status();
      // An over-long line (binary data?) cannot be skipped reliably: count it and stop here.
      (void)MalformedMessage(std::string(more.status().message()));
      stopped_ = true;
      break;
    }
    if (!*more) break;
    ++stats_.lines;
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    absl::Status s;
    switch (format_) {
      case TraceFormat::kMsr:
        s = ParseMsrLine(trimmed, &parsed_);
        break;
      case TraceFormat::kSpc:
        s = ParseSpcLine(trimmed, &parsed_);
        break;
      default:
        s = ParseFiuLine(trimmed, &parsed_);
        break;
    }
    if (!s.ok()) {
      // A column header on the first data line is not an error.
      if (!seen_data_line_ && !LooksNumeric(trimmed)) {
        seen_data_line_ = true;
        continue;
      }
      seen_data_line_ = true;
      absl::Status m = Malformed(s);
      if (!m.ok()) return m;
      continue;
    }
    seen_data_line_ = true;
    if (!have_base_time_) {
      base_time_us_ = parsed_.time_us;
      have_base_time_ = true;
    }
    Request& r = out[n++];
    r.time_us = parsed_.time_us >= base_time_us_ ? parsed_.time_us - base_time_us_ : 0;
    r.offset = parsed_.offset;
    r.length = static_cast<uint32_t>(parsed_.length);
    r.op = parsed_.op;
    r.vdi = VdiId(parsed_.vdi_key);
    ++stats_.requests;
  }
  return n;
}

}  // namespace ringcache::sim
