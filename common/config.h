// Helpers for daemon configuration: YAML files read strictly (an unknown key or a value of the
// wrong type is an error naming the key and the file), byte sizes with units, and directory checks.
// Thread-compatible: a YamlFields object is used by one thread while a config is loaded.
#ifndef RINGCACHE_COMMON_CONFIG_H_
#define RINGCACHE_COMMON_CONFIG_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <memory>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringcache {

// Parses "4096", "4K", "4KiB", "10G", "1.5GiB" (K/M/G/T are powers of 1024). Returns
// kInvalidArgument naming the text when it is not a size.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// Loads and parses a YAML file; errors name the file and, for syntax errors, the line.
absl::StatusOr<YAML::Node> LoadYamlFile(const std::string& path);

// Creates `dir` (and parents) if missing and checks that a file can be created in it.
absl::Status EnsureWritableDir(const std::string& dir);

// Reads the keys of one YAML mapping into typed fields, remembering which keys were consumed so
// that Finish() can reject unknown ones. Errors carry "file: key.path: problem".
class YamlFields {
 public:
  YamlFields(YAML::Node node, std::string file, std::string prefix = "");

  // Each Read copies `key`'s value into *out if the key is present; a bad value records an error.
  void Read(const char* key, std::string* out);
  void Read(const char* key, bool* out);
  void Read(const char* key, int64_t* out);
  void Read(const char* key, uint32_t* out);
  void Read(const char* key, double* out);
  // Reads a byte size ("64MiB" or an integer).
  void ReadSize(const char* key, uint64_t* out);
  // Marks `key` as known without reading it (the caller parses it itself).
  void Skip(const char* key) { Get(key); }
  // Returns the nested mapping `key` (empty if absent), sharing this object's error list.
  YamlFields Sub(const char* key);
  // Returns the first error, or an error naming the unknown keys, or OK.
  absl::Status Finish();

 private:
  std::string Where(const char* key) const;
  YAML::Node Get(const char* key);
  void Fail(const char* key, const std::string& what);

  YAML::Node node_;
  std::string file_;
  std::string prefix_;
  // Shared by a mapping and all its Sub()s, so Finish() on the root checks every level.
  struct Shared {
    absl::Status error;
    std::set<std::string> seen;  // full dotted paths of consumed keys
    std::vector<std::pair<YAML::Node, std::string>> scopes;  // (mapping, prefix)
  };
  std::shared_ptr<Shared> shared_;
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_CONFIG_H_
