// Test helpers for byte-exact NBD wire tests: hex in, hex out, option requests and their
// payloads, and the flags a read-write export advertises.
#ifndef RINGCACHE_GATEWAY_TESTING_NBD_HEX_H_
#define RINGCACHE_GATEWAY_TESTING_NBD_HEX_H_

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gateway/nbd_protocol.h"

namespace ringcache::gateway::nbd {

// Decodes hex digits, ignoring spaces: Hex("4e42 444d") == "NBDM".
inline std::string Hex(const std::string& text) {
  std::string out;
  int nibble = -1;
  for (char c : text) {
    if (c == ' ' || c == '\n') continue;
    const int v = (c >= '0' && c <= '9') ? c - '0' : (c | 0x20) - 'a' + 10;
    if (nibble < 0) {
      nibble = v;
    } else {
      out.push_back(static_cast<char>(nibble * 16 + v));
      nibble = -1;
    }
  }
  return out;
}

inline std::string ToHex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

#define EXPECT_BYTES(expected_hex, actual) EXPECT_EQ(ToHex(Hex(expected_hex)), ToHex(actual))

// An option request: magic, option, length, data.
inline std::string Option(uint32_t option, const std::string& data) {
  std::string out;
  PutU64(&out, kOptionMagic);
  PutU32(&out, option);
  PutU32(&out, static_cast<uint32_t>(data.size()));
  return out + data;
}

inline std::string U32(uint32_t v) {
  std::string s;
  PutU32(&s, v);
  return s;
}
inline std::string U16(uint16_t v) {
  std::string s;
  PutU16(&s, v);
  return s;
}

inline std::string GoPayload(const std::string& name, const std::vector<uint16_t>& infos) {
  std::string s = U32(static_cast<uint32_t>(name.size())) + name + U16(infos.size());
  for (uint16_t i : infos) s += U16(i);
  return s;
}

constexpr uint16_t kRwFlags = kTxHasFlags | kTxSendFlush | kTxSendFua | kTxSendTrim |
                              kTxSendWriteZeroes | kTxCanMultiConn | kTxSendCache |
                              kTxSendFastZero;  // 0x0d6d

}  // namespace ringcache::gateway::nbd

#endif  // RINGCACHE_GATEWAY_TESTING_NBD_HEX_H_
