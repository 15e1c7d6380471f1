// The commands of ringcachectl (docs/design.md §8). Each one calls the gateway's Admin service
// (proto/ringcache/v1/admin.proto) and prints its result to the session's output stream, as an
// aligned table or as one line of JSON with --json. Parsing the command line lives in cli.cc.
//
// Errors come back as absl::Status: an unreachable gateway is kUnavailable with a message
// "cannot reach gateway at HOST:PORT: ..."; a refusal by the gateway keeps the gateway's code and
// message unchanged. Nothing is printed to the output stream for a failed unary call.
//
// Thread-compatible: an AdminSession and the commands run on one thread.
#ifndef RINGCACHE_TOOLS_CTL_COMMANDS_H_
#define RINGCACHE_TOOLS_CTL_COMMANDS_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ringcache/v1/admin.grpc.pb.h"
#include "tools/ctl/format.h"

namespace ringcache::ctl {

// What every command needs: the stub, where the gateway is, and how to print.
struct AdminSession {
  // Creates a session for `gateway` ("HOST:PORT"): mutual TLS with the process's identity
  // (ringcachectl --tls-dir), else plaintext.
  static AdminSession Connect(const std::string& gateway, std::ostream* out, std::ostream* err);

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Admin::StubInterface> stub;
  std::string gateway;          // as given, for messages
  std::ostream* out = nullptr;  // not owned; results
  std::ostream* err = nullptr;  // not owned; warnings that do not fail the command
  bool json = false;
  // Deadline of each unary call. Flush streams without one: it lasts as long as the destage.
  std::chrono::milliseconds timeout{30000};
};

// Returns the command-line name of a cache mode ("writeback", ...; "unspecified" for 0).
std::string CacheModeName(v1::CacheMode mode);
// Parses "writeback", "writethrough", "writearound" or "passthrough".
absl::StatusOr<v1::CacheMode> ParseCacheMode(const std::string& name);

struct CreateVdiArgs {
  std::string name;
  uint64_t size_bytes = 0;
  uint32_t object_size = 0;  // 0: the gateway's default (4 MiB)
  uint32_t replication = 0;  // 0: the gateway's default
};

// vdi create: prints the new VDI's geometry.
absl::Status CreateVdi(const AdminSession& s, const CreateVdiArgs& args);
// vdi list: prints every VDI with its geometry and cache mode. If the cache nodes cannot report
// the modes, the list is still printed (mode "?") and a warning goes to the session's `err`.
absl::Status ListVdis(const AdminSession& s);
// How `vdi list` and `vdi access` show a VDI's NBD access: "rw" or "ro", then "public",
// "any-identity" or the client identities (read-only ones marked "(ro)").
std::string FormatAccess(const v1::VdiAccess& a);
// The access fields of `a` into the open JSON object of `j`.
void WriteAccessJson(const v1::VdiAccess& a, JsonWriter* j);

struct VdiAccessArgs {
  std::string name;
  std::optional<bool> read_only;
  std::optional<std::vector<std::string>> allowed_clients;  // empty vector: any identity
  std::optional<bool> public_export;
  std::string allow;  // vdi allow: one identity, read-only with allow_read_only
  bool allow_read_only = false;
  std::string deny;  // vdi deny: one identity
};
// vdi access, allow, deny: changes (or with no change given, shows) who may open a VDI and
// whether it is read-only; prints the access as it now is.
absl::Status SetVdiAccess(const AdminSession& s, const VdiAccessArgs& args);

// vdi delete: deletes the VDI and its data on every node. The caller has confirmed.
absl::Status DeleteVdi(const AdminSession& s, const std::string& name);
// vdi resize: sets the VDI's size; shrinking destages it first.
absl::Status ResizeVdi(const AdminSession& s, const std::string& name, uint64_t size_bytes);
// vdi set-policy: switches the VDI's cache policy on every cache node, live ("default": the
// nodes' own policy).
absl::Status SetVdiPolicy(const AdminSession& s, const std::string& name,
                          const std::string& policy);
// vdi set-mode: switches the VDI's cache mode; leaving writeback destages it first.
absl::Status SetVdiMode(const AdminSession& s, const std::string& name, v1::CacheMode mode);

// vdi invalidate: drops the VDI's clean cached blocks on every cache node; refused while it has
// dirty data unless `flush` (destage first). Prints the blocks dropped.
absl::Status InvalidateVdi(const AdminSession& s, const std::string& name, bool flush);

// The node commands (node_commands.cc).
// node list: prints every node (role, id, address, capacity, zone, state; cache nodes also SSD
// used, dirty bytes and hit ratio).
absl::Status ListNodes(const AdminSession& s);
// cluster version (cluster_commands.cc): the releases the registered nodes run (cluster mode:
// from their etcd records), whether they are all the same, the cluster's feature level, and
// this ringcachectl's release and formats.
absl::Status ClusterVersion(const AdminSession& s);
// cluster finalize: raises the feature level as far as every registered node supports.
absl::Status FinalizeCluster(const AdminSession& s);
// vdi set-qos: replaces a VDI's I/O limits (all 0: none) and prints them.
absl::Status SetVdiQos(const AdminSession& s, const std::string& name, const v1::VdiQos& qos);
// A VDI's limits as a JSON object (vdi list --json, vdi set-qos --json).
void WriteQosJson(const v1::VdiQos& qos, JsonWriter* j);
// node drain / node remove: asks the gateway to take node `role`/`id` out of the ring. `verb`
// ("drain" or "remove") only changes the message printed on success.
absl::Status RemoveNode(const AdminSession& s, const std::string& verb, const std::string& role,
                        uint32_t id);
// node undrain: brings a drained or removed cache node back into the ring; prints what happened.
absl::Status UndrainNode(const AdminSession& s, const std::string& role, uint32_t id);
// `node resize ID [--ssd SIZE] [--ram SIZE]`: resizes cache node `id`'s SSD and RAM tiers (0:
// unchanged); with `wait`, an SSD shrink is followed (progress on the error stream) until the
// released slots are empty and cut. A new SSD size gives the node the ring weight of that size
// unless `keep_weight` (the gateway's rule: docs/cache-node.md, "Resizing the tiers").
absl::Status ResizeNode(const AdminSession& s, uint32_t id, uint64_t ssd_bytes,
                        uint64_t ram_bytes, bool wait, bool keep_weight = false);

// datanode out|in|decommission ID: asks the coordinator to take data node `id` out of the data
// ring, put it back in, or decommission it; prints what happens next.
absl::Status DataNodeAction(const AdminSession& s, const std::string& action, uint32_t id);

// scrub status|start: the data nodes' scrub and the coordinator's repairs; `start` begins a
// pass on every data node first.
absl::Status Scrub(const AdminSession& s, bool start);

// status: prints the epoch, node counts by role and state, the number of VDIs and dirty bytes.
absl::Status ClusterStatus(const AdminSession& s);
// stats: prints per-VDI cache statistics; `vdi` empty means every VDI.
absl::Status VdiStats(const AdminSession& s, const std::string& vdi);
// flush: forces a destage of `vdi` (empty: all VDIs) and prints one progress line per report
// until the gateway says done. With --json each report is one JSON object per line.
absl::Status Flush(const AdminSession& s, const std::string& vdi);

}  // namespace ringcache::ctl

#endif  // RINGCACHE_TOOLS_CTL_COMMANDS_H_
