// Policy spec parsing: see spec_parser.h.
#include "cachenode/policy/spec_parser.h"

#include <cctype>

#include "absl/strings/ascii.h"

namespace ringcache::policy::spec {
namespace {

struct ComponentInfo {
  const char* name;
  Role role;
};

constexpr ComponentInfo kComponents[] = {
    {"lru", Role::kOrder},        {"fifo", Role::kOrder},      {"arc", Role::kOrder},
    {"s3fifo", Role::kOrder},     {"cflru", Role::kOrder},     {"vbq", Role::kSpace},
    {"always", Role::kAdmission}, {"sieve", Role::kAdmission}, {"rpac", Role::kAdmission},
    {"cmf", Role::kBypass},       {"seqcut", Role::kBypass},   {"lcr", Role::kVictim},
    {"iarc", Role::kComplete},    {"garc", Role::kComplete},   {"uarc", Role::kComplete},
    {"opt", Role::kComplete},
};

}  // namespace

const char* RoleName(Role r) {
  switch (r) {
    case Role::kOrder:
      return "order";
    case Role::kSpace:
      return "space";
    case Role::kAdmission:
      return "admission";
    case Role::kBypass:
      return "bypass";
    case Role::kVictim:
      return "victim";
    case Role::kComplete:
      return "complete policy";
  }
  return "?";
}

namespace {

bool IsNameChar(char ch) {
  return std::islower(static_cast<unsigned char>(ch)) ||
         std::isdigit(static_cast<unsigned char>(ch)) || ch == '_';
}

absl::StatusOr<Component> ParseComponent(absl::string_view text) {
  Component c;
  c.text = std::string(text);
  const size_t open = text.find('(');
  absl::string_view name = absl::StripAsciiWhitespace(text.substr(0, open));
  if (name.empty())
    return absl::InvalidArgumentError(absl::StrCat("empty component name in '", text, "'"));
  for (char ch : name) {
    if (!IsNameChar(ch)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown policy component '", name, "'"));
    }
  }
  c.name = std::string(name);
  const ComponentInfo* info = nullptr;
  for (const ComponentInfo& ci : kComponents) {
    if (c.name == ci.name) info = &ci;
  }
  if (info == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown policy component '", c.name, "'"));
  }
  c.role = info->role;
  if (open == absl::string_view::npos) return c;
  absl::string_view rest = absl::StripTrailingAsciiWhitespace(text.substr(open + 1));
  if (rest.empty() || rest.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("missing ')' in '", text, "'"));
  }
  rest.remove_suffix(1);
  if (absl::StripAsciiWhitespace(rest).empty()) return c;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    if (comma == absl::string_view::npos) comma = rest.size();
    absl::string_view kv = absl::StripAsciiWhitespace(rest.substr(start, comma - start));
    const size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", kv, "' of '", c.name, "' is not key=value"));
    }
    std::string key(absl::StripAsciiWhitespace(kv.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(kv.substr(eq + 1)));
    if (key.empty() || value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", kv, "' of '", c.name, "' is not key=value"));
    }
    for (const auto& [k, v] : c.params) {
      if (k == key) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter '", key, "' given twice for '", c.name, "'"));
      }
    }
    c.params.emplace_back(std::move(key), std::move(value));
    start = comma + 1;
  }
  return c;
}

}  // namespace

absl::StatusOr<std::vector<Component>> Parse(absl::string_view spec) {
  std::vector<Component> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= spec.size(); ++i) {
    const char ch = i < spec.size() ? spec[i] : '+';
    if (ch == '(') ++depth;
    if (ch == ')' && --depth < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unbalanced ')' in spec '", spec, "'"));
    }
    if (ch != '+' || depth > 0) continue;
    absl::string_view piece = absl::StripAsciiWhitespace(spec.substr(start, i - start));
    if (piece.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("empty component in spec '", spec, "'"));
    }
    absl::StatusOr<Component> c = ParseComponent(piece);
    if (!c.ok()) return c.status();
    out.push_back(*std::move(c));
    start = i + 1;
  }
  if (depth != 0)
    return absl::InvalidArgumentError(absl::StrCat("missing ')' in spec '", spec, "'"));
  return out;
}

std::vector<std::string> ComponentNames() {
  std::vector<std::string> names;
  for (const ComponentInfo& c : kComponents) names.emplace_back(c.name);
  return names;
}

}  // namespace ringcache::policy::spec
