#include "common/cluster_file.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace ringcache {
namespace {

// OK when `id` is a valid cluster id (empty included); else kInvalidArgument naming `where`.
absl::Status ValidateClusterId(const std::string& id, const std::string& where) {
  const bool ok = id.size() <= 48 && std::all_of(id.begin(), id.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": cluster_id '", id, "' must be at most 48 of the characters A-Z a-z 0-9 . _ -"));
}

}  // namespace

absl::StatusOr<ClusterFile> ClusterFile::Load(const std::string& path) {
  RC_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlFile(path));
  ClusterFile c;
  YamlFields f(root, path);
  f.Read("cluster_id", &c.cluster_id);
  f.Read("data_dir", &c.data_dir);
  f.Read("replication", &c.replication);
  f.Read("block_size", &c.block_size);
  f.Read("policy", &c.policy);
  f.Read("placement", &c.placement);
  f.Read("etcd_endpoints", &c.etcd_endpoints);
  f.Read("etcd_prefix", &c.etcd_prefix);
  f.Read("etcd_lease_ttl_s", &c.etcd_lease_ttl_s);
  // "nodes" is a sequence: read each mapping strictly with its own YamlFields.
  YAML::Node nodes = root["nodes"];
  f.Skip("nodes");
  RC_RETURN_IF_ERROR(f.Finish());
  RC_RETURN_IF_ERROR(ValidateClusterId(c.cluster_id, path));
  std::set<std::pair<std::string, uint32_t>> seen;
  if (nodes && !nodes.IsSequence()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": nodes must be a list"));
  }
  for (size_t i = 0; nodes && i < nodes.size(); ++i) {
    ClusterNode n;
    YamlFields nf(nodes[i], path, absl::StrCat("nodes[", i, "]."));
    nf.Read("role", &n.role);
    nf.Read("id", &n.id);
    nf.Read("listen", &n.listen);
    nf.Read("http_listen", &n.http_listen);
    nf.Read("nbd_listen", &n.nbd_listen);
    nf.Read("admin_listen", &n.admin_listen);
    nf.ReadSize("ssd_bytes", &n.ssd_bytes);
    nf.ReadSize("ram_bytes", &n.ram_bytes);
    nf.Read("weight", &n.weight);
    nf.Read("zone", &n.zone);
    nf.Read("ssd_write_budget", &n.ssd_write_budget);
    nf.Read("ssd_rated_years", &n.ssd_rated_years);
    RC_RETURN_IF_ERROR(nf.Finish());
    const std::string where = absl::StrCat(path, ": nodes[", i, "]");
    if (n.role != "gateway" && n.role != "cachenode" && n.role != "datanode") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": role must be gateway, cachenode or datanode"));
    }
    if (n.id == 0) return absl::InvalidArgumentError(absl::StrCat(where, ": id must be >= 1"));
    if (!seen.insert({n.role, n.id}).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": duplicate ", n.role, " ", n.id));
    }
    std::string host;
    int port = 0;
    if (n.role != "gateway") RC_RETURN_IF_ERROR(SplitHostPort(n.listen, &host, &port));
    if (n.role == "gateway") {
      RC_RETURN_IF_ERROR(SplitHostPort(n.nbd_listen, &host, &port));
      RC_RETURN_IF_ERROR(SplitHostPort(n.admin_listen, &host, &port));
    }
    if (n.http_listen.empty()) n.http_listen = "127.0.0.1:0";
    c.nodes.push_back(n);
  }
  if (c.OfRole("gateway").empty() && c.OfRole("cachenode").empty() &&
      c.OfRole("datanode").empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no nodes listed"));
  }
  return c;
}

absl::StatusOr<ClusterNode> ClusterFile::Find(const std::string& role, uint32_t id) const {
  for (const auto& n : nodes) {
    if (n.role == role && n.id == id) return n;
  }
  return absl::NotFoundError(absl::StrCat("no ", role, " with id ", id, " in the cluster file"));
}

std::vector<ClusterNode> ClusterFile::OfRole(const std::string& role) const {
  std::vector<ClusterNode> out;
  for (const auto& n : nodes) {
    if (n.role == role) out.push_back(n);
  }
  return out;
}

std::string ClusterFile::NodeDir(const ClusterNode& n) const {
  return absl::StrCat(data_dir, "/", n.role, "-", n.id);
}

}  // namespace ringcache
