// The canonical form of a per-VDI cache policy spec, shared by the gateway (which stores specs in
// its catalog without linking the policy engine) and the cache node's policy registry (which
// parses them): whitespace removed, and "default" (the node's own policy) as "".
#ifndef RINGCACHE_COMMON_POLICY_SPEC_H_
#define RINGCACHE_COMMON_POLICY_SPEC_H_

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace ringcache {

inline std::string CanonicalPolicySpec(std::string_view spec_in) {
  std::string spec(spec_in);
  spec.erase(
      std::remove_if(spec.begin(), spec.end(), [](unsigned char ch) { return std::isspace(ch); }),
      spec.end());
  return spec == "default" ? std::string() : spec;
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_POLICY_SPEC_H_
