// Strict YAML configuration loading.
#include "common/config.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringcache {

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text_in) {
  // Debian's abseil is built with its own string_view type, so convert once here.
  const std::string text(text_in);
  std::string s(absl::StripAsciiWhitespace(text));
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a byte size (examples: 4096, 64KiB, 10G, 1.5TiB)"));
  };
  if (s.empty()) return bad();
  size_t i = 0;
  while (i < s.size() && (absl::ascii_isdigit(s[i]) || s[i] == '.')) ++i;
  double num = 0;
  if (i == 0 || !absl::SimpleAtod(s.substr(0, i), &num) || num < 0) return bad();
  std::string unit = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(s.substr(i)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();  // KB, KIB -> K, KI
  if (unit.size() == 2 && unit.back() == 'I') unit.pop_back();  // KI -> K
  double mult = 1;
  if (unit.empty()) {
    mult = 1;
  } else if (unit == "K") {
    mult = 1024.0;
  } else if (unit == "M") {
    mult = 1024.0 * 1024;
  } else if (unit == "G") {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit == "T") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return bad();
  }
  const double v = num * mult;
  if (v != std::floor(v) || v > 1.8e19) return bad();
  return static_cast<uint64_t>(v);
}

absl::StatusOr<YAML::Node> LoadYamlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("config file '", path, "' cannot be read"));
  try {
    YAML::Node n = YAML::Load(in);
    if (n.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!n.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": top level must be a mapping"));
    }
    return n;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": YAML error at line ", e.mark.line + 1,
                                                   ": ", e.msg));
  }
}

absl::Status EnsureWritableDir(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("directory path is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create directory '", dir, "': ", ec.message()));
  }
  if (!std::filesystem::is_directory(dir)) {
    return absl::InvalidArgumentError(absl::StrCat("'", dir, "' is not a directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("directory '", dir, "' is not writable"));
  }
  return absl::OkStatus();
}

YamlFields::YamlFields(YAML::Node node, std::string file, std::string prefix)
    : node_(std::move(node)),
      file_(std::move(file)),
      prefix_(std::move(prefix)),
      shared_(std::make_shared<Shared>()) {
  shared_->scopes.emplace_back(node_, prefix_);
}

std::string YamlFields::Where(const char* key) const {
  return absl::StrCat(file_, ": ", prefix_, key);
}

void YamlFields::Fail(const char* key, const std::string& what) {
  if (shared_->error.ok()) {
    shared_->error = absl::InvalidArgumentError(absl::StrCat(Where(key), ": ", what));
  }
}

YAML::Node YamlFields::Get(const char* key) {
  shared_->seen.insert(absl::StrCat(prefix_, key));
  if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node_[key];
}

void YamlFields::Read(const char* key, std::string* out) {
  YAML::Node v = Get(key);
  if (!v) return;
  if (!v.IsScalar()) return Fail(key, "expected a string");
  *out = v.Scalar();
}

void YamlFields::Read(const char* key, bool* out) {
  YAML::Node v = Get(key);
  if (!v) return;
  bool b = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b)) {
    return Fail(key, absl::StrCat("expected true or false, got '", v.Scalar(), "'"));
  }
  *out = b;
}

void YamlFields::Read(const char* key, int64_t* out) {
  YAML::Node v = Get(key);
  if (!v) return;
  int64_t x = 0;
  if (!v.IsScalar() || !absl::SimpleAtoi(v.Scalar(), &x)) {
    return Fail(key, absl::StrCat("expected an integer, got '", v.Scalar(), "'"));
  }
  *out = x;
}

void YamlFields::Read(const char* key, uint32_t* out) {
  YAML::Node v = Get(key);
  if (!v) return;
  uint32_t x = 0;
  if (!v.IsScalar() || !absl::SimpleAtoi(v.Scalar(), &x)) {
    return Fail(key, absl::StrCat("expected a non-negative integer, got '", v.Scalar(), "'"));
  }
  *out = x;
}

void YamlFields::Read(const char* key, double* out) {
  YAML::Node v = Get(key);
  if (!v) return;
  double x = 0;
  if (!v.IsScalar() || !absl::SimpleAtod(v.Scalar(), &x)) {
    return Fail(key, absl::StrCat("expected a number, got '", v.Scalar(), "'"));
  }
  *out = x;
}

void YamlFields::ReadSize(const char* key, uint64_t* out) {
  YAML::Node v = Get(key);
  if (!v) return;
  if (!v.IsScalar()) return Fail(key, "expected a byte size");
  auto s = ParseByteSize(v.Scalar());
  if (!s.ok()) return Fail(key, std::string(s.status().message()));
  *out = *s;
}

YamlFields YamlFields::Sub(const char* key) {
  YAML::Node v = Get(key);
  if (v && !v.IsMap()) Fail(key, "expected a mapping");
  YamlFields sub(YAML::Node(), file_, absl::StrCat(prefix_, key, "."));
  sub.node_ = v && v.IsMap() ? v : YAML::Node();
  sub.shared_ = shared_;
  shared_->scopes.emplace_back(sub.node_, sub.prefix_);
  return sub;
}

absl::Status YamlFields::Finish() {
  if (!shared_->error.ok()) return shared_->error;
  std::vector<std::string> unknown;
  for (const auto& [node, prefix] : shared_->scopes) {
    if (!node.IsMap()) continue;
    for (const auto& kv : node) {
      const std::string k = absl::StrCat(prefix, kv.first.as<std::string>());
      if (!shared_->seen.count(k)) unknown.push_back(k);
    }
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": unknown key(s): ", absl::StrJoin(unknown, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace ringcache
