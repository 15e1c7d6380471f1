#include "coordinator/catalog.h"
#include "tools/ctl/cli.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/config.h"
#include "common/grpc_tls.h"
#include "common/status_macros.h"
#include "common/tls_certs.h"
#include "coordinator/election.h"
#include "membership/etcd_auth.h"
#include "membership/presence.h"
#include "tools/ctl/backup.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/restore.h"
#include "common/version.h"

namespace ringcache::ctl {
namespace {

constexpr const char* kDefaultGateway = "127.0.0.1:7200";

// Everything the command line can set. CLI11 writes into these fields while parsing.
struct Args {
  std::string gateway = kDefaultGateway;
  std::string etcd;
  std::string etcd_prefix = "/ringcache";
  bool json = false;
  double timeout_s = 30;
  std::string name;
  std::string size;
  std::string object_size;
  std::optional<uint32_t> replication;
  std::string mode;
  std::string policy;
  std::string role = "cachenode";
  uint32_t node_id = 0;
  std::string vdi;
  bool yes = false;
  bool wait = true;
  bool flush_first = false;  // vdi invalidate --flush
  std::string tls_dir;
  // vdi access
  std::string read_only_text;
  std::vector<std::string> allow;
  bool allow_any = false;
  std::string public_text;
  std::string identity;
  bool allow_read_only = false;
  // tls init-ca / issue
  std::string cluster;
  std::string ca_dir;
  std::string out_dir;
  std::vector<std::string> ips;
  std::vector<std::string> dns;
  int days = 365;
  // etcd add-user
  std::vector<std::string> users;
  // vdi set-qos
  uint64_t read_iops = 0, write_iops = 0, iops = 0, reserve_iops = 0;
  std::string read_bps, write_bps, bps, reserve_bps;
  uint32_t burst_ms = 0;
  double ssd_min = 0, ssd_max = 0;
  bool no_limits = false;
  bool dry_run = false;  // restore
  // node resize
  std::string ssd, ram;
  bool no_wait = false;
  bool keep_weight = false;
};

// A command that needs no gateway (tls ...).
using LocalAction = std::function<absl::Status()>;

using Action = std::function<absl::Status(const AdminSession&)>;

// Returns the parsed value of a size that already passed ByteSizeCheck.
uint64_t SizeOf(const std::string& text) { return ParseByteSize(text).value_or(0); }

// A CLI11 check that accepts what common/config.h ParseByteSize accepts ("10G", "4MiB", "4096")
// and at most `max`; the message names the problem so the usage error explains itself.
CLI::Validator ByteSizeCheck(uint64_t max, const std::string& max_text) {
  return CLI::Validator(
      [max, max_text](std::string& text) -> std::string {
        absl::StatusOr<uint64_t> v = ParseByteSize(text);
        if (!v.ok()) return std::string(v.status().message());
        if (*v == 0) return "'" + text + "' is zero; a size must be positive";
        if (*v > max) return "'" + text + "' is larger than " + max_text;
        return "";
      },
      "SIZE", "byte size");
}

void AddQosCommand(CLI::App* vdi, Args* a, Action* action);

void AddVdiCommands(CLI::App* app, Args* a, Action* action) {
  CLI::App* vdi = app->add_subcommand("vdi", "Create, list, delete, resize VDIs; set cache modes");
  vdi->require_subcommand(1);

  CLI::App* create = vdi->add_subcommand("create", "Create a VDI (virtual disk)");
  create->add_option("NAME", a->name, "VDI name (also the NBD export name)")->required();
  create->add_option("--size", a->size, "Size, e.g. 10G, 512MiB (a multiple of 4 KiB)")
      ->type_name("SIZE")
      ->required()
      ->check(ByteSizeCheck(UINT64_MAX, "2^64-1"));
  create->add_option("--object-size", a->object_size, "Bytes per object (default 4M)")
      ->type_name("SIZE")
      ->check(ByteSizeCheck(UINT32_MAX, "4 GiB - 1"));
  create
      ->add_option("--replication", a->replication,
                   "Home replicas on data nodes (default: the gateway's, 3 or fewer)")
      ->type_name("N")
      ->check(CLI::Range(1, 16));
  create->callback([a, action] {
    *action = [a](const AdminSession& s) {
      CreateVdiArgs c;
      c.name = a->name;
      c.size_bytes = SizeOf(a->size);
      c.object_size = a->object_size.empty() ? 0 : static_cast<uint32_t>(SizeOf(a->object_size));
      c.replication = a->replication.value_or(0);
      return CreateVdi(s, c);
    };
  });

  vdi->add_subcommand("list", "List VDIs with their geometry and cache mode")->callback([action] {
    *action = [](const AdminSession& s) { return ListVdis(s); };
  });

  CLI::App* del = vdi->add_subcommand("delete", "Delete a VDI and all its data");
  del->add_option("NAME", a->name, "VDI name")->required();
  del->add_flag("-y,--yes", a->yes, "Do not ask for confirmation (required without a terminal)");
  del->callback(
      [a, action] { *action = [a](const AdminSession& s) { return DeleteVdi(s, a->name); }; });

  CLI::App* inval = vdi->add_subcommand(
      "invalidate", "Drop a VDI's clean cached blocks on every cache node (its data stays on "
                    "the data nodes; reads refill the cache). Refused while it has dirty data, "
                    "unless --flush");
  inval->add_option("NAME", a->name, "VDI name")->required();
  inval->add_flag("--flush", a->flush_first,
                  "Destage the VDI's dirty data first instead of refusing");
  inval->callback([a, action] {
    *action = [a](const AdminSession& s) { return InvalidateVdi(s, a->name, a->flush_first); };
  });

  CLI::App* resize =
      vdi->add_subcommand("resize", "Change a VDI's size (shrinking destages first)");
  resize->add_option("NAME", a->name, "VDI name")->required();
  resize->add_option("--size", a->size, "New size, e.g. 20G")
      ->type_name("SIZE")
      ->required()
      ->check(ByteSizeCheck(UINT64_MAX, "2^64-1"));
  resize->callback([a, action] {
    *action = [a](const AdminSession& s) { return ResizeVdi(s, a->name, SizeOf(a->size)); };
  });

  CLI::App* access = vdi->add_subcommand(
      "access", "Who may open a VDI over NBD (TLS client identities) and whether it is "
                "read-only; with no option, show it. Open connections keep what they had");
  access->add_option("NAME", a->name, "VDI name")->required();
  access->add_option("--read-only", a->read_only_text, "on: export read-only; off: read-write")
      ->check(CLI::IsMember({"on", "off"}));
  access->add_option("--allow", a->allow,
                     "Only these client identities (certificate CN or PSK identity; repeatable, "
                     "or comma-separated)")
      ->delimiter(',');
  access->add_flag("--allow-any", a->allow_any,
                   "Any client with an identity may open it (clears both lists)");
  access->add_option("--public", a->public_text,
                     "on: any client, with or without a certificate (the lists do not apply); "
                     "off: only clients with an identity, as the lists say")
      ->check(CLI::IsMember({"on", "off"}));
  access->callback([a, action] {
    *action = [a](const AdminSession& s) {
      if (a->allow_any && !a->allow.empty()) {
        return absl::InvalidArgumentError("give --allow or --allow-any, not both");
      }
      VdiAccessArgs args;
      args.name = a->name;
      if (!a->read_only_text.empty()) args.read_only = a->read_only_text == "on";
      if (!a->public_text.empty()) args.public_export = a->public_text == "on";
      if (a->allow_any) args.allowed_clients.emplace();
      if (!a->allow.empty()) args.allowed_clients = a->allow;
      return SetVdiAccess(s, args);
    };
  });

  CLI::App* allow = vdi->add_subcommand(
      "allow", "Let one client identity (certificate CN or PSK identity) open a VDI over NBD, "
               "read-write or with --read-only; the others on its list keep their access");
  allow->add_option("NAME", a->name, "VDI name")->required();
  allow->add_option("IDENTITY", a->identity, "Client identity")->required();
  allow->add_flag("--read-only", a->allow_read_only, "Read-only for this client");
  allow->callback([a, action] {
    *action = [a](const AdminSession& s) {
      VdiAccessArgs args;
      args.name = a->name;
      args.allow = a->identity;
      args.allow_read_only = a->allow_read_only;
      return SetVdiAccess(s, args);
    };
  });
  CLI::App* deny = vdi->add_subcommand(
      "deny", "Take one client identity off a VDI's lists (refused for the last one: empty "
              "lists let any client with a certificate in)");
  deny->add_option("NAME", a->name, "VDI name")->required();
  deny->add_option("IDENTITY", a->identity, "Client identity")->required();
  deny->callback([a, action] {
    *action = [a](const AdminSession& s) {
      VdiAccessArgs args;
      args.name = a->name;
      args.deny = a->identity;
      return SetVdiAccess(s, args);
    };
  });

  CLI::App* mode = vdi->add_subcommand(
      "set-mode", "Switch a VDI's cache mode (leaving writeback destages its dirty blocks first)");
  mode->add_option("NAME", a->name, "VDI name")->required();
  mode->add_option("MODE", a->mode, "writeback | writethrough | writearound | passthrough")
      ->required()
      ->check(CLI::IsMember({"writeback", "writethrough", "writearound", "passthrough"}));
  mode->callback([a, action] {
    *action = [a](const AdminSession& s) {
      absl::StatusOr<v1::CacheMode> m = ParseCacheMode(a->mode);
      if (!m.ok()) return m.status();
      return SetVdiMode(s, a->name, *m);
    };
  });

  CLI::App* pol = vdi->add_subcommand(
      "set-policy",
      "Switch a VDI's cache policy live on every cache node; its cached and dirty blocks stay");
  pol->add_option("NAME", a->name, "VDI name")->required();
  pol->add_option("POLICY", a->policy,
                  "Policy spec for the VDI's queue: order (lru, fifo, arc, s3fifo, cflru), "
                  "admission (always, sieve), bypasses (cmf, seqcut), victim (lcr), joined by "
                  "'+', e.g. 'arc+sieve' or 's3fifo+cmf(threshold=0.9)'; 'default' for the "
                  "nodes' own policy")
      ->required();
  pol->callback([a, action] {
    *action = [a](const AdminSession& s) { return SetVdiPolicy(s, a->name, a->policy); };
  });
  AddQosCommand(vdi, a, action);
}

void AddQosCommand(CLI::App* vdi, Args* a, Action* action) {
  CLI::App* qos = vdi->add_subcommand(
      "set-qos",
      "Set a VDI's I/O limits, enforced by the gateways cluster-wide: requests over them are "
      "delayed, never failed. Replaces every limit the VDI had; --none removes them "
      "(docs/qos.md). Needs cluster feature level 2 (`cluster finalize`)");
  qos->add_option("NAME", a->name, "VDI name")->required();
  qos->add_option("--read-iops", a->read_iops, "Reads per second")->type_name("N");
  qos->add_option("--write-iops", a->write_iops, "Writes per second (trims and zero writes too)")
      ->type_name("N");
  qos->add_option("--iops", a->iops, "Reads and writes per second together")->type_name("N");
  for (auto [flag, field, what] : {std::tuple{"--read-bps", &a->read_bps, "read"},
                                   std::tuple{"--write-bps", &a->write_bps, "written"},
                                   std::tuple{"--bps", &a->bps, "read and written together"}}) {
    qos->add_option(flag, *field, std::string("Bytes per second ") + what + ", e.g. 100M")
        ->type_name("SIZE")
        ->check(ByteSizeCheck(uint64_t{1} << 50, "1 PiB"));
  }
  qos->add_option("--burst-ms", a->burst_ms,
                  "How much of each rate may go at once after a quiet spell (default 1000 ms)")
      ->type_name("MS")
      ->check(CLI::Range(1, 60000));
  qos->add_option("--ssd-min", a->ssd_min,
                  "Cache space: the share of each cache node's SSD the VDI keeps at least, in "
                  "percent (reclaim takes other VDIs' blocks first)")
      ->type_name("PERCENT")
      ->check(CLI::Range(0.1, 100.0));
  qos->add_option("--ssd-max", a->ssd_max,
                  "Cache space: the share of each cache node's SSD the VDI holds at most, in "
                  "percent (its own blocks make room for its new ones)")
      ->type_name("PERCENT")
      ->check(CLI::Range(0.1, 100.0));
  qos->add_option("--reserve-iops", a->reserve_iops,
                  "A reservation: reads and writes per second the VDI gets however busy the "
                  "gateway's other VDIs are (they are held back for it), up to its limits")
      ->type_name("N");
  qos->add_option("--reserve-bps", a->reserve_bps,
                  "A reservation of bytes per second read and written together, e.g. 50M")
      ->type_name("SIZE")
      ->check(ByteSizeCheck(uint64_t{1} << 50, "1 PiB"));
  qos->add_flag("--none", a->no_limits, "Remove every limit, reservation and share");
  qos->callback([a, action] {
    *action = [a](const AdminSession& s) {
      v1::VdiQos q;
      q.set_read_iops(a->read_iops);
      q.set_write_iops(a->write_iops);
      q.set_iops(a->iops);
      q.set_read_bytes_per_s(a->read_bps.empty() ? 0 : SizeOf(a->read_bps));
      q.set_write_bytes_per_s(a->write_bps.empty() ? 0 : SizeOf(a->write_bps));
      q.set_bytes_per_s(a->bps.empty() ? 0 : SizeOf(a->bps));
      q.set_reserve_iops(a->reserve_iops);
      q.set_reserve_bytes_per_s(a->reserve_bps.empty() ? 0 : SizeOf(a->reserve_bps));
      q.set_burst_ms(a->burst_ms);
      q.set_ssd_min_permille(static_cast<uint32_t>(std::lround(a->ssd_min * 10)));
      q.set_ssd_max_permille(static_cast<uint32_t>(std::lround(a->ssd_max * 10)));
      const bool any = coordinator::QosLimited(q) || coordinator::QosShares(q);
      if (any == a->no_limits) {
        return absl::InvalidArgumentError(
            any ? "give limits or --none, not both"
                : "give at least one limit (--read-iops, --write-iops, --iops, --read-bps, "
                  "--write-bps, --bps), reservation (--reserve-iops, --reserve-bps) or share "
                  "(--ssd-min, --ssd-max), or --none to remove them");
      }
      if (a->ssd_max > 0 && a->ssd_min > a->ssd_max) {
        return absl::InvalidArgumentError("--ssd-min is above --ssd-max");
      }
      return SetVdiQos(s, a->name, q);
    };
  });
}

void AddUndrainCommand(CLI::App* node, Args* a, Action* action) {
  CLI::App* sub = node->add_subcommand(
      "undrain", "Bring a drained or removed cache node back into the ring (cluster mode: clear "
                 "its drained mark; it joins once registered)");
  sub->add_option("ID", a->node_id, "Node id, as in `node list`")->required();
  sub->add_option("--role", a->role, "Node role (default cachenode)")
      ->check(CLI::IsMember({"cachenode", "datanode", "gateway"}));
  sub->callback([a, action] {
    *action = [a](const AdminSession& s) { return UndrainNode(s, a->role, a->node_id); };
  });
}

void AddResizeCommand(CLI::App* node, Args* a, Action* action) {
  CLI::App* sub = node->add_subcommand(
      "resize",
      "Resize a cache node's SSD and RAM tiers while it serves: growing takes effect at once; "
      "shrinking the SSD moves the blocks out of the released slots (dirty ones destaged "
      "first), then cuts the slot file; shrinking the RAM demotes its coldest blocks to the SSD");
  sub->add_option("ID", a->node_id, "Cache node id, as in `node list`")->required();
  sub->add_option("--ssd", a->ssd, "The SSD tier's new size, e.g. 200G")
      ->type_name("SIZE")
      ->check(ByteSizeCheck(UINT64_MAX, "2^64-1"));
  sub->add_option("--ram", a->ram,
                  "The RAM tier's new size, e.g. 4G (a node that runs without one gets none)")
      ->type_name("SIZE")
      ->check(ByteSizeCheck(UINT64_MAX, "2^64-1"));
  sub->add_flag("--no-wait", a->no_wait,
                "Return once the shrink started instead of waiting until it is done");
  sub->add_flag("--keep-weight", a->keep_weight,
                "Leave the node's cache ring weight as it is (by default a new SSD size gives it "
                "the weight of that size: registered weight x size / configured size, and the "
                "objects that move change owner as in a join)");
  sub->callback([a, action] {
    if (a->ssd.empty() && a->ram.empty()) {
      throw CLI::ValidationError("give --ssd SIZE, --ram SIZE or both");
    }
    *action = [a](const AdminSession& s) {
      return ResizeNode(s, a->node_id, a->ssd.empty() ? 0 : SizeOf(a->ssd),
                        a->ram.empty() ? 0 : SizeOf(a->ram), !a->no_wait, a->keep_weight);
    };
  });
}

void AddNodeCommands(CLI::App* app, Args* a, Action* action) {
  CLI::App* node = app->add_subcommand("node", "List, drain, undrain and remove cluster nodes");
  node->require_subcommand(1);
  node->add_subcommand("list", "List nodes: role, id, address, capacity, zone, state")
      ->callback([action] { *action = [](const AdminSession& s) { return ListNodes(s); }; });

  for (const char* verb : {"drain", "remove"}) {
    CLI::App* sub = node->add_subcommand(
        verb, std::string(verb) == "drain"
                  ? "Destage a live cache node's data, then take it out of the ring"
                  : "Take a cache node out of the ring: a live one destages first, a dead one's "
                    "write-back log is replayed home; its objects then go to the next nodes "
                    "(--role datanode: `datanode decommission`)");
    sub->add_option("ID", a->node_id, "Node id, as in `node list`")->required();
    sub->add_option("--role", a->role, "Node role (default cachenode)")
        ->check(CLI::IsMember({"cachenode", "datanode", "gateway"}));
    const std::string v = verb;
    sub->callback([a, action, v] {
      *action = [a, v](const AdminSession& s) { return RemoveNode(s, v, a->role, a->node_id); };
    });
  }
  AddUndrainCommand(node, a, action);
  AddResizeCommand(node, a, action);
}

void AddDataNodeCommands(CLI::App* app, Args* a, Action* action) {
  CLI::App* dn = app->add_subcommand(
      "datanode", "Data nodes out of and into the data ring (docs/durability.md)");
  dn->require_subcommand(1);
  const struct {
    const char* verb;
    const char* help;
  } verbs[] = {
      {"out", "Take a data node out now (as if down past the down-out interval): no I/O goes "
              "there and its replicas are made again on the others"},
      {"in", "Put an out data node back in: it joins again as a new node (its store cleared)"},
      {"decommission", "Move every replica off a live data node, then take it out (refused "
                       "when fewer data nodes than a VDI's replication would be left)"},
  };
  for (const auto& v : verbs) {
    CLI::App* sub = dn->add_subcommand(v.verb, v.help);
    sub->add_option("ID", a->node_id, "Data node id, as in `node list`")->required();
    const std::string verb = v.verb;
    sub->callback([a, action, verb] {
      *action = [a, verb](const AdminSession& s) { return DataNodeAction(s, verb, a->node_id); };
    });
  }
}

void AddScrubCommands(CLI::App* app, Action* action) {
  CLI::App* scrub = app->add_subcommand(
      "scrub", "The data nodes' background scrub: checksums of every block and log record, "
               "and the repairs from good copies (docs/durability.md)");
  scrub->require_subcommand(1);
  scrub->add_subcommand("status", "Progress per data node, damaged copies found and repaired")
      ->callback([action] { *action = [](const AdminSession& s) { return Scrub(s, false); }; });
  scrub->add_subcommand("start", "Begin a scrub pass on every data node now")
      ->callback([action] { *action = [](const AdminSession& s) { return Scrub(s, true); }; });
}

void AddClusterCommands(CLI::App* app, Args* a, Action* action) {
  CLI::App* cluster = app->add_subcommand("cluster", "The cluster as a whole");
  cluster->require_subcommand(1);
  cluster
      ->add_subcommand("version",
                       "The releases the nodes run (mixed during an upgrade), the cluster's "
                       "feature level, and this ringcachectl's release and formats "
                       "(docs/upgrades.md)")
      ->callback([action] { *action = [](const AdminSession& s) { return ClusterVersion(s); }; });
  cluster
      ->add_subcommand("finalize",
                       "Raise the cluster's feature level to the highest every registered node "
                       "supports, which lets new formats be written; after it the previous "
                       "release can no longer be put back (docs/upgrades.md)")
      ->callback([action] { *action = [](const AdminSession& s) { return FinalizeCluster(s); }; });
  app->add_subcommand("status", "Cluster summary: epoch, nodes, VDIs, dirty bytes, data rebalance")
      ->callback([action] { *action = [](const AdminSession& s) { return ClusterStatus(s); }; });

  CLI::App* stats = app->add_subcommand(
      "stats", "Per-VDI cache statistics: hit ratio, hits, misses, queue, L_m, U_i, D_i, "
               "dirty bytes, the age of the oldest dirty block and the admission's state");
  stats->add_option("--vdi", a->vdi, "Only this VDI (default: all)");
  stats->callback(
      [a, action] { *action = [a](const AdminSession& s) { return VdiStats(s, a->vdi); }; });

  CLI::App* flush = app->add_subcommand(
      "flush", "Destage the blocks dirty now to the data nodes, printing progress until done");
  flush->add_option("--vdi", a->vdi, "Only this VDI (default: all)");
  flush->add_flag("--wait", a->wait,
                  "Wait until the destage is done (the default and only behaviour: progress "
                  "lines stream until the gateway reports done)");
  flush->callback(
      [a, action] { *action = [a](const AdminSession& s) { return Flush(s, a->vdi); }; });
}

void AddTlsCommands(CLI::App* app, Args* a, LocalAction* local) {
  CLI::App* t = app->add_subcommand(
      "tls", "Make a cluster's CA and certificates (no gateway needed; docs/security.md)");
  t->require_subcommand(1);
  CLI::App* ca = t->add_subcommand("init-ca", "Create a CA for a cluster: DIR/ca-cert.pem and "
                                              "DIR/ca-key.pem (kept private, mode 0600)");
  ca->add_option("--dir", a->ca_dir, "Directory for the CA")->required();
  ca->add_option("--cluster", a->cluster,
                 "The cluster's name: every certificate the CA issues carries it (O=)")
      ->required();
  ca->add_option("--days", a->days, "Validity in days (default 365)")->check(CLI::PositiveNumber);
  ca->callback([a, local] {
    *local = [a] { return tls::WriteCa(a->ca_dir, a->cluster, a->days); };
  });
  CLI::App* issue = t->add_subcommand(
      "issue", "Issue a certificate: OUT/ca-cert.pem, OUT/cert.pem, OUT/key.pem (for --role "
               "client also client-cert.pem and client-key.pem, as QEMU and libnbd expect)");
  issue->add_option("--ca", a->ca_dir, "The CA's directory (from tls init-ca)")->required();
  issue->add_option("--role", a->role, "gateway, cachenode, datanode, admin, client or etcd")
      ->required()
      ->check(CLI::IsMember({tls::kRoleGateway, tls::kRoleCacheNode, tls::kRoleDataNode,
                             tls::kRoleAdmin, tls::kRoleClient, tls::kRoleEtcd}));
  issue->add_option("--name", a->name, "The holder's name (CN): a node, host or client identity")
      ->required();
  issue->add_option("--ip", a->ips, "An IP address the holder serves on (repeatable; etcd and "
                                    "HTTPS clients check it)");
  issue->add_option("--dns", a->dns, "A DNS name the holder serves on (repeatable)");
  issue->add_option("--out", a->out_dir, "Directory to write (created if missing)")->required();
  issue->add_option("--days", a->days, "Validity in days (default 365)")
      ->check(CLI::PositiveNumber);
  issue->callback([a, local] {
    *local = [a] {
      tls::CertRequest req;
      req.role = a->role;
      req.name = a->name;
      req.ips = a->ips;
      req.dns = a->dns;
      req.days = a->days;
      return tls::WriteIssued(a->ca_dir, req, a->out_dir);
    };
  });
  CLI::App* revoke = t->add_subcommand(
      "revoke", "Revoke certificates: add them to CA/crl.pem (made if missing), signed by the "
                "CA; copy it into each daemon's --tls-dir as crl.pem and send SIGHUP");
  revoke->add_option("--ca", a->ca_dir, "The CA's directory (from tls init-ca)")->required();
  revoke->add_option("certs", a->users, "Certificate files (PEM) to revoke")
      ->required()
      ->check(CLI::ExistingFile);
  revoke->add_option("--days", a->days, "Until the list's next update, in days (default 365)")
      ->check(CLI::PositiveNumber);
  revoke->callback([a, local] {
    *local = [a] { return tls::WriteRevoked(a->ca_dir, a->users, a->days); };
  });
}

// A client of the cluster's etcd at --etcd's endpoints (with --tls-dir's certificate when
// given: etcd knows users by its CN); `what` names the command in the error without --etcd.
absl::StatusOr<std::unique_ptr<membership::EtcdClient>> ClusterEtcd(const Args& a,
                                                                    const char* what) {
  if (a.etcd.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " needs --etcd HOST:PORT,... (or RINGCACHE_ETCD)"));
  }
  membership::EtcdSettings settings;
  settings.endpoints = a.etcd;
  settings.prefix = a.etcd_prefix;
  RC_RETURN_IF_ERROR(settings.Validate());
  return membership::ConnectEtcd(settings);
}

// The etcd client of `etcd ...` commands: an admin certificate is required (it becomes etcd's
// root user).
absl::StatusOr<std::unique_ptr<membership::EtcdClient>> AdminEtcd(const Args& a) {
  if (tls::ProcessIdentity() == nullptr && !a.etcd.empty()) {
    return absl::InvalidArgumentError(
        "etcd commands need --tls-dir with an admin certificate: etcd knows its users by the CN "
        "of their TLS certificate, and this one becomes its root user");
  }
  return ClusterEtcd(a, "etcd commands");
}

// `backup DIR` and `restore DIR`: etcd's state, straight from etcd (no gateway needed).
void AddBackupCommands(CLI::App* app, Args* a, LocalAction* local, std::ostream* out,
                       std::ostream* err) {
  CLI::App* backup = app->add_subcommand(
      "backup", "Save etcd's state (a snapshot of the store and a manifest of what it holds) in "
                "DIR; needs --etcd (docs/upgrades.md, \"Backup and restore\")");
  backup->add_option("dir", a->out_dir, "A new directory for the backup")->required();
  backup->callback([a, local, out] {
    *local = [a, out]() -> absl::Status {
      RC_ASSIGN_OR_RETURN(auto etcd, ClusterEtcd(*a, "backup"));
      BackupOptions o;
      o.dir = a->out_dir;
      o.prefix = a->etcd_prefix;
      o.endpoints = a->etcd;
      o.json = a->json;
      return Backup(etcd.get(), o, out);
    };
  });
  CLI::App* restore = app->add_subcommand(
      "restore", "After etcd was restored from DIR/etcd.db (etcdctl snapshot restore), raise "
                 "etcd's rings, terms and catalog to what the data and cache nodes did after "
                 "the backup; needs --etcd, and the gateways stopped (docs/upgrades.md)");
  restore->add_option("dir", a->out_dir, "The backup directory")->required();
  restore->add_flag("--dry-run", a->dry_run, "Print what would change; change nothing");
  restore->callback([a, local, out, err] {
    *local = [a, out, err]() -> absl::Status {
      RC_ASSIGN_OR_RETURN(auto etcd, ClusterEtcd(*a, "restore"));
      RestoreOptions o;
      o.dir = a->out_dir;
      o.prefix = a->etcd_prefix;
      o.dry_run = a->dry_run;
      o.node_timeout = absl::Seconds(a->timeout_s);
      return Restore(etcd.get(), o, out, err);
    };
  });
}

void AddEtcdCommands(CLI::App* app, Args* a, LocalAction* local, std::ostream* out) {
  CLI::App* e = app->add_subcommand(
      "etcd", "etcd's users and roles, one role per component (needs --etcd and --tls-dir with "
              "an admin certificate; docs/security.md, \"etcd\")");
  e->require_subcommand(1);
  CLI::App* enable = e->add_subcommand(
      "enable-auth",
      "Create the roles of the gateway, cache nodes and data nodes, make this certificate's CN "
      "etcd's root user, and turn etcd's authentication on (idempotent)");
  enable->callback([a, local, out] {
    *local = [a, out]() -> absl::Status {
      RC_ASSIGN_OR_RETURN(auto etcd, AdminEtcd(*a));
      const std::string& admin = tls::ProcessIdentity()->name.name;
      RC_RETURN_IF_ERROR(membership::EnableEtcdAuth(*etcd, a->etcd_prefix, admin));
      *out << "etcd authentication on at " << a->etcd << "; root user '" << admin
                << "'; roles for gateway, cachenode, datanode under " << a->etcd_prefix << "\n";
      return absl::OkStatus();
    };
  });
  CLI::App* add = e->add_subcommand(
      "add-user", "Give certificate holders (by CN) the etcd role of their component "
                  "(idempotent; run for every node whose certificate you issue)");
  add->add_option("--role", a->role, "gateway, cachenode, datanode or admin")
      ->required()
      ->check(CLI::IsMember(
          {tls::kRoleGateway, tls::kRoleCacheNode, tls::kRoleDataNode, tls::kRoleAdmin}));
  add->add_option("names", a->users, "The holders' CNs (the --name of `tls issue`)")
      ->required();
  add->callback([a, local] {
    *local = [a]() -> absl::Status {
      RC_ASSIGN_OR_RETURN(auto etcd, AdminEtcd(*a));
      for (const std::string& name : a->users) {
        RC_RETURN_IF_ERROR(membership::AddEtcdUser(*etcd, a->etcd_prefix, a->role, name));
      }
      return absl::OkStatus();
    };
  });
}

// Asks on `io.err` whether to delete VDI `name`; returns true on "y" or "yes".
bool ConfirmDelete(const std::string& name, const CtlIo& io) {
  *io.err << "Delete VDI '" << name << "' and all its data? [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(*io.in, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes";
}

// Prints a usage error: the message, then the usage of the (sub)command being parsed.
int UsageError(const CLI::App& app, const std::string& message, const CtlIo& io) {
  *io.err << "ringcachectl: " << message << "\n\n" << app.help();
  return kExitUsage;
}

}  // namespace

int RunCtl(int argc, const char* const* argv, const CtlIo& io) {
  CLI::App app{
      "ringcachectl: administer a ringcache cluster through its gateway's Admin service.\n"
      "VDIs are served over NBD as nbd://HOST:10809/NAME."};
  app.name("ringcachectl");
  app.fallthrough();  // global options also after the subcommand: `vdi list --json`
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionLine("ringcachectl"));
  // The footer is inherited by every subcommand, so each --help names the global options too.
  app.footer(
      "Global options, before or after the command: --gateway HOST:PORT (env RINGCACHE_GATEWAY)\n"
      "or --etcd HOST:PORT,... (env RINGCACHE_ETCD; cluster mode: use the gateway registered\n"
      "there), --etcd-prefix P, --json, --timeout SECONDS, --tls-dir DIR (env RINGCACHE_TLS_DIR).\n"
      "Exit status: 0 success, 1 the gateway refused or could not be reached, 2 usage error.\n"
      "Examples:\n"
      "  ringcachectl vdi create disk1 --size 10G\n"
      "  ringcachectl --gateway 10.0.0.5:7200 stats --vdi disk1\n"
      "  ringcachectl --etcd 10.0.0.2:2379 status\n"
      "  ringcachectl vdi list --json");

  Args a;
  Action action;
  app.add_option("--gateway", a.gateway, "Admin address HOST:PORT (default 127.0.0.1:7200)")
      ->type_name("HOST:PORT")
      ->envname("RINGCACHE_GATEWAY");
  app.add_option("--etcd", a.etcd,
                 "Cluster mode: find the gateway in etcd at these endpoints (its admin address "
                 "is registered under <prefix>/nodes/gateway/; the elected coordinator first)")
      ->type_name("HOST:PORT,...")
      ->envname("RINGCACHE_ETCD");
  app.add_option("--etcd-prefix", a.etcd_prefix, "Key prefix in etcd (default /ringcache)");
  app.add_flag("--json", a.json, "Print results as JSON (one document per line) for scripts");
  app.add_option("--tls-dir", a.tls_dir,
                 "Speak TLS to the gateway (and etcd) with the admin certificate in this "
                 "directory: ca-cert.pem, cert.pem, key.pem (`tls issue --role admin`)")
      ->envname("RINGCACHE_TLS_DIR")
      ->check(CLI::ExistingDirectory);
  app.add_option("--timeout", a.timeout_s, "Seconds to wait for each answer (default 30)")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber);
  AddVdiCommands(&app, &a, &action);
  AddNodeCommands(&app, &a, &action);
  AddDataNodeCommands(&app, &a, &action);
  AddScrubCommands(&app, &action);
  AddClusterCommands(&app, &a, &action);
  LocalAction local;
  AddTlsCommands(&app, &a, &local);
  AddEtcdCommands(&app, &a, &local, io.out);
  AddBackupCommands(&app, &a, &local, io.out, io.err);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e, *io.out, *io.err);  // --help, --version
    }
    return UsageError(app, e.what(), io);
  }
  if (!a.tls_dir.empty()) {
    absl::StatusOr<std::shared_ptr<const tls::Identity>> id = tls::LoadIdentity(a.tls_dir);
    if (!id.ok()) {
      *io.err << "ringcachectl: " << id.status().message() << '\n';
      return kExitUsage;
    }
    tls::SetProcessIdentity(*id);
  }
  if (local) {
    if (absl::Status s = local(); !s.ok()) {
      *io.err << "ringcachectl: " << s.message() << '\n';
      const bool usage = app.got_subcommand("etcd") || app.got_subcommand("backup") ||
                         app.got_subcommand("restore");
      return absl::IsInvalidArgument(s) && usage ? kExitUsage : kExitFailed;
    }
    return kExitOk;
  }
  if (!action) return UsageError(app, "no command given", io);

  if (app.get_subcommand("vdi")->got_subcommand("delete") && !a.yes) {
    if (!io.in_is_terminal) {
      return UsageError(app,
                        "refusing to delete VDI '" + a.name +
                            "' without --yes (no terminal to ask for confirmation)",
                        io);
    }
    if (!ConfirmDelete(a.name, io)) {
      *io.err << "not deleted\n";
      return kExitFailed;
    }
  }

  if (!a.etcd.empty()) {
    if (app.count("--gateway") > 0) {
      return UsageError(app, "give --gateway or --etcd, not both", io);
    }
    absl::StatusOr<std::string> found = GatewayFromEtcd(a.etcd, a.etcd_prefix, a.timeout_s);
    if (!found.ok()) {
      *io.err << "ringcachectl: " << found.status().message() << '\n';
      return kExitFailed;
    }
    a.gateway = *found;
  }
  AdminSession session = AdminSession::Connect(a.gateway, io.out, io.err);
  session.json = a.json;
  session.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(a.timeout_s * 1000)));
  absl::Status status = action(session);
  io.out->flush();
  if (!status.ok()) {
    *io.err << "ringcachectl: " << status.message() << '\n';
    return kExitFailed;
  }
  return kExitOk;
}

absl::StatusOr<std::string> GatewayFromEtcd(const std::string& endpoints,
                                            const std::string& prefix, double timeout_s) {
  membership::EtcdSettings settings;
  settings.endpoints = endpoints;
  settings.prefix = prefix;
  if (absl::Status s = settings.Validate(); !s.ok()) return s;
  auto client = membership::ConnectEtcd(settings);
  if (!client.ok()) return client.status();
  membership::EtcdClient::CallOptions call;
  call.timeout = absl::Seconds(timeout_s);
  // The elected coordinator first: it makes every change (membership/README.md).
  if (auto leader = coordinator::ReadLeader(client->get(), prefix);
      leader.ok() && leader->has_value()) {
    return (*leader)->record.address;
  }
  auto range =
      (*client)->GetPrefix(membership::RolePrefix(prefix, membership::Role::kGateway), call);
  if (!range.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot read the gateways from etcd at ",
                                               endpoints, ": ", range.status().message()));
  }
  for (const auto& kv : range->kvs) {  // sorted by key: the lowest gateway id first
    auto record = membership::DecodeNodeRecord(kv.value);
    if (record.ok()) return record->address;
  }
  return absl::NotFoundError(absl::StrCat("no gateway registered under ",
                                          membership::RolePrefix(prefix,
                                                                 membership::Role::kGateway),
                                          " in etcd at ", endpoints));
}

}  // namespace ringcache::ctl
