// Policy specs in parts: the grammar of "vbq(share=utility)+arc+sieve(freq=1)+lcr" (components
// joined by '+', each a name and optional key=value parameters) and typed access to a
// component's parameters. The registry (registry.cc) builds policies from what this reads.
//
// Thread-safety: pure functions; a Params is used by one thread.
#ifndef RINGCACHE_CACHENODE_POLICY_SPEC_PARSER_H_
#define RINGCACHE_CACHENODE_POLICY_SPEC_PARSER_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace ringcache::policy::spec {

// What a component is in a policy (cachenode/policy/README.md, "Registry and spec grammar").
enum class Role { kOrder, kSpace, kAdmission, kBypass, kVictim, kComplete };

// What a role is called in messages ("order", "complete policy", ...).
const char* RoleName(Role r);

// One component of a spec as written: its name, role and parameters.
struct Component {
  std::string name;
  Role role = Role::kOrder;
  std::vector<std::pair<std::string, std::string>> params;
  std::string text;  // as written, for messages
};

// Splits a spec into its components (names checked against the known ones, parameters
// parsed, not yet checked): kInvalidArgument naming what is wrong.
absl::StatusOr<std::vector<Component>> Parse(absl::string_view spec);

// Every component name, in the registry's order.
std::vector<std::string> ComponentNames();

// Typed access to a component's key=value parameters; Finish() rejects keys nobody read.
class Params {
 public:
  explicit Params(const Component& c) : c_(c), used_(c.params.size(), false) {}

  absl::Status Double(absl::string_view key, double* v) {
    const std::string* s = Take(key);
    if (s == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtod(*s, v)) return Bad(key, *s, "a number");
    return absl::OkStatus();
  }
  absl::Status Uint(absl::string_view key, uint64_t* v) {
    const std::string* s = Take(key);
    if (s == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtoi(*s, v)) return Bad(key, *s, "a non-negative integer");
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status UintAs(absl::string_view key, T* v) {
    uint64_t u = *v;
    if (absl::Status st = Uint(key, &u); !st.ok()) return st;
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return Bad(key, absl::StrCat(u), "a smaller integer");
    }
    *v = static_cast<T>(u);
    return absl::OkStatus();
  }
  // A value out of `words`; *index is set to its position.
  absl::Status Word(absl::string_view key, std::initializer_list<const char*> words, int* index) {
    const std::string* s = Take(key);
    if (s == nullptr) return absl::OkStatus();
    int i = 0;
    for (const char* w : words) {
      if (*s == w) {
        *index = i;
        return absl::OkStatus();
      }
      ++i;
    }
    return Bad(key, *s, absl::StrJoin(words, " or "));
  }
  absl::Status Bool(absl::string_view key, bool* v) {
    const std::string* s = Take(key);
    if (s == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtob(*s, v)) return Bad(key, *s, "0, 1, true or false");
    return absl::OkStatus();
  }
  // Returns an error naming the first parameter no getter consumed.
  absl::Status Finish() const {
    for (size_t i = 0; i < used_.size(); ++i) {
      if (!used_[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown parameter '", c_.params[i].first, "' for '", c_.name, "'"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::string* Take(absl::string_view key) {
    for (size_t i = 0; i < c_.params.size(); ++i) {
      if (c_.params[i].first == key) {
        used_[i] = true;
        return &c_.params[i].second;
      }
    }
    return nullptr;
  }
  absl::Status Bad(absl::string_view key, absl::string_view value, absl::string_view want) const {
    return absl::InvalidArgumentError(absl::StrCat("bad value '", value, "' for parameter '", key,
                                                   "' of '", c_.name, "': want ", want));
  }

  const Component& c_;
  std::vector<bool> used_;
};

}  // namespace ringcache::policy::spec

#endif  // RINGCACHE_CACHENODE_POLICY_SPEC_PARSER_H_
