// JsonQuote: a string as a JSON string literal, for the hand-written JSON of ringcachectl --json
// and ringcache-sim --json. Header-only so pure tools can use it without linking rc_common.
//
// Thread-safety: a pure function.
#ifndef RINGCACHE_COMMON_JSON_QUOTE_H_
#define RINGCACHE_COMMON_JSON_QUOTE_H_

#include <cstdio>
#include <string>
#include <string_view>

namespace ringcache {

// Returns `text` quoted, with ", \ and control characters escaped; bytes >= 0x80 pass through
// (names are UTF-8 or ASCII).
inline std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_JSON_QUOTE_H_
