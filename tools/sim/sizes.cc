// Size parsing. See sizes.h.
#include "tools/sim/sizes.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringcache::sim {

bool SizeIsRelative(absl::string_view text) {
  return absl::EndsWith(absl::StripAsciiWhitespace(text), "%");
}

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  while (i < t.size() && (absl::ascii_isdigit(t[i]) || t[i] == '.')) ++i;
  double num = 0;
  if (i == 0 || !absl::SimpleAtod(t.substr(0, i), &num)) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "'"));
  }
  std::string unit = absl::AsciiStrToLower(t.substr(i));
  double mult = 0;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else {
    static const char kPrefixes[] = "kmgtp";
    size_t p = absl::string_view(kPrefixes).find(unit[0]);
    absl::string_view rest = absl::string_view(unit).substr(1);
    if (p == absl::string_view::npos ||
        !(rest.empty() || rest == "i" || rest == "ib" || rest == "b")) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad size unit in '", text, "' (use B, KiB, MiB, GiB, TiB, KB, MB, ...)"));
    }
    double base = rest == "b" ? 1000.0 : 1024.0;
    mult = std::pow(base, static_cast<double>(p + 1));
  }
  double bytes = num * mult;
  if (!(bytes < 1.8e19)) return absl::InvalidArgumentError(absl::StrCat("size too large: ", text));
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<uint64_t> ParseCacheSize(absl::string_view text, uint32_t block_size,
                                        uint64_t working_set_blocks) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  uint64_t blocks = 0;
  if (absl::ConsumeSuffix(&t, "%")) {
    double pct = 0;
    if (!absl::SimpleAtod(t, &pct) || !(pct > 0) || pct > 1e6) {
      return absl::InvalidArgumentError(absl::StrCat("bad percentage size '", text, "'"));
    }
    blocks = static_cast<uint64_t>(std::llround(pct / 100.0 * working_set_blocks));
  } else {
    uint64_t plain = 0;
    if (absl::SimpleAtoi(t, &plain)) {
      blocks = plain;
    } else {
      absl::StatusOr<uint64_t> bytes = ParseBytes(t);
      if (!bytes.ok()) return bytes.status();
      blocks = *bytes / block_size;
    }
  }
  if (blocks == 0) {
    return absl::InvalidArgumentError(absl::StrCat("cache size '", text, "' is 0 blocks"));
  }
  return blocks;
}

}  // namespace ringcache::sim
