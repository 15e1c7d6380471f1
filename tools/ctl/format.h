// Output formatting for ringcachectl: human-readable sizes, rates and ratios, aligned text tables,
// and a small streaming JSON writer for --json. Pure string code: no gRPC, no I/O beyond the
// std::ostream a caller passes in.
//
// Thread-compatible: a Table or JsonWriter is used by one thread; the free functions are
// thread-safe.
#ifndef RINGCACHE_TOOLS_CTL_FORMAT_H_
#define RINGCACHE_TOOLS_CTL_FORMAT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_quote.h"

namespace ringcache::ctl {

using ::ringcache::JsonQuote;

// Returns `bytes` in binary units with one decimal: "0 B", "512 B", "1.0 KiB", "1.5 GiB",
// "16.0 EiB". Values below 1 KiB are exact; larger ones are rounded to one decimal.
std::string FormatBytes(uint64_t bytes);

// Returns a rate such as "0 B/s", "12.3 MiB/s". Negative or non-finite rates print as "-".
std::string FormatRate(double bytes_per_second);

// Returns `fraction` (0..1) as a percentage with one decimal: 0.5 -> "50.0%". Non-finite -> "-".
std::string FormatPercent(double fraction);

// Returns `value` with exactly `decimals` digits after the point ("3.142"). Non-finite -> "-".
std::string FormatFixed(double value, int decimals);

// Returns a duration such as "45s", "3m20s", "2h05m". Negative or non-finite -> "-".
std::string FormatDuration(double seconds);

// How far a job that shrinks a quantity (dirty bytes to destage) has come: `done` is the share of
// `total` no longer `left` (0..1; 1 when total is 0), `eta_seconds` the time `left` takes at
// `rate` per second (-1 when the rate is unknown or zero and something is left).
struct Progress {
  double done = 0;
  double eta_seconds = -1;
};
Progress ProgressOf(uint64_t total, uint64_t left, double rate);

// "12.0 MiB dirty left, 40.0% done, 8.0 MiB/s, ETA 2s" (ETA "-" while the rate is unknown).
std::string FormatDirtyProgress(uint64_t total, uint64_t left, double rate);

// An aligned text table: a header row, then one row per AddRow, columns separated by two
// spaces, no trailing whitespace. Numbers read best right-aligned (Align::kRight).
class Table {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit Table(std::vector<Column> columns);

  // Appends a row. REQUIRES: cells.size() equals the number of columns.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }
  // Writes the header and all rows to `out`.
  void Render(std::ostream& out) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Writes "key:  value" lines with the values aligned after the longest key.
void RenderFields(const std::vector<std::pair<std::string, std::string>>& fields,
                  std::ostream& out);

// Builds compact JSON text (one line, no spaces) in insertion order. Commas are placed
// automatically; the caller keeps Begin/End calls balanced and calls Key() before each value
// inside an object. Non-finite doubles become null, since JSON has no NaN or Infinity.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);

  // Shorthands for Key(key) followed by the value.
  JsonWriter& Field(std::string_view key, std::string_view value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, const char* value) { return Key(key).String(value); }
  JsonWriter& Field(std::string_view key, uint64_t value) { return Key(key).Uint(value); }
  JsonWriter& Field(std::string_view key, uint32_t value) { return Key(key).Uint(value); }
  JsonWriter& Field(std::string_view key, double value) { return Key(key).Double(value); }
  JsonWriter& Field(std::string_view key, bool value) { return Key(key).Bool(value); }

  // Returns the text written so far.
  const std::string& str() const { return out_; }

 private:
  // Emits a comma if a value already precedes this one at the current nesting level.
  void BeforeValue();
  void Open(char c);
  void Close(char c);

  std::string out_;
  // One entry per open object/array: true once it holds a value. Invariant: after Key() the top
  // entry is already true and after_key_ is set, so the value that follows emits no comma.
  std::vector<bool> has_value_;
  bool after_key_ = false;
};

}  // namespace ringcache::ctl

#endif  // RINGCACHE_TOOLS_CTL_FORMAT_H_
