#include "tools/ctl/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace ringcache::ctl {
namespace {

constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
constexpr int kLastUnit = 6;

// Scales `value` (bytes) into the largest binary unit that keeps it below 1024, taking into
// account that one-decimal rounding may carry it up to the next unit (1023.97 KiB -> 1.0 MiB).
// Returns the unit index and stores the scaled value in *scaled.
int ScaleBytes(double value, double* scaled) {
  int unit = 0;
  while (value >= 1024 && unit < kLastUnit) {
    value /= 1024;
    ++unit;
  }
  if (unit > 0 && unit < kLastUnit && std::round(value * 10) / 10 >= 1024) {
    value /= 1024;
    ++unit;
  }
  *scaled = value;
  return unit;
}

std::string Printf(const char* format, double value, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value, unit);
  return buf;
}

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double scaled = 0;
  const int unit = ScaleBytes(static_cast<double>(bytes), &scaled);
  return Printf("%.1f %s", scaled, kUnits[unit]);
}

std::string FormatRate(double bytes_per_second) {
  if (!std::isfinite(bytes_per_second) || bytes_per_second < 0) return "-";
  double scaled = 0;
  const int unit = ScaleBytes(bytes_per_second, &scaled);
  return Printf(unit == 0 ? "%.0f %s/s" : "%.1f %s/s", scaled, kUnits[unit]);
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return Printf("%.1f%s", fraction * 100, "%");
}

std::string FormatFixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", std::clamp(decimals, 0, 17), value);
  return buf;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  const long long s = std::llround(seconds);
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, s % 3600 / 60);
  }
  return buf;
}

Progress ProgressOf(uint64_t total, uint64_t left, double rate) {
  Progress p;
  if (left > total) total = left;  // more became dirty meanwhile: measure from the peak
  p.done = total == 0 ? 1.0 : static_cast<double>(total - left) / static_cast<double>(total);
  if (left == 0) {
    p.eta_seconds = 0;
  } else if (std::isfinite(rate) && rate > 0) {
    p.eta_seconds = static_cast<double>(left) / rate;
  }
  return p;
}

std::string FormatDirtyProgress(uint64_t total, uint64_t left, double rate) {
  const Progress p = ProgressOf(total, left, rate);
  return FormatBytes(left) + " dirty left, " + FormatPercent(p.done) + " done, " +
         FormatRate(rate) + ", ETA " + FormatDuration(p.eta_seconds);
}

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());  // defensive: a short row pads, a long one is cut
  rows_.push_back(std::move(cells));
}

void Table::Render(std::ostream& out) const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = columns_[c].header.size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (columns_[c].align == Align::kRight) {
        line += pad + cells[c];
      } else {
        line += cells[c] + pad;
      }
    }
    line.erase(line.find_last_not_of(' ') + 1);  // npos + 1 == 0 clears an all-blank line
    out << line << '\n';
  };
  std::vector<std::string> header;
  for (const auto& col : columns_) header.push_back(col.header);
  emit(header);
  for (const auto& row : rows_) emit(row);
}

void RenderFields(const std::vector<std::pair<std::string, std::string>>& fields,
                  std::ostream& out) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size() + 1);
  for (const auto& [key, value] : fields) {
    out << key << ':' << std::string(width - key.size() - 1 + 2, ' ') << value << '\n';
  }
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_value_.empty()) {
    if (has_value_.back()) out_ += ',';
    has_value_.back() = true;
  }
}

void JsonWriter::Open(char c) {
  BeforeValue();
  out_ += c;
  has_value_.push_back(false);
}

void JsonWriter::Close(char c) {
  if (!has_value_.empty()) has_value_.pop_back();
  out_ += c;
}

JsonWriter& JsonWriter::BeginObject() {
  Open('{');
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  Close('}');
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  Open('[');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Close(']');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  out_ += JsonQuote(key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += JsonQuote(value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  if (!std::isfinite(value)) {
    out_ += "null";
    return *this;
  }
  char buf[32];
  // Shortest text that reads back as the same double.
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

}  // namespace ringcache::ctl
