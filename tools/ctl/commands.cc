#include "tools/ctl/commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc_tls.h"
#include "tools/ctl/format.h"
#include "tools/ctl/health.h"
#include "tools/ctl/rpc.h"

namespace ringcache::ctl {
namespace {

constexpr std::pair<v1::CacheMode, const char*> kModeNames[] = {
    {v1::WRITEBACK, "writeback"},
    {v1::WRITETHROUGH, "writethrough"},
    {v1::WRITEAROUND, "writearound"},
    {v1::PASSTHROUGH, "passthrough"},
};

}  // namespace

void SetDeadline(const AdminSession& s, grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + s.timeout);
}

absl::Status FromRpc(const AdminSession& s, const grpc::Status& st) {
  if (st.ok()) return absl::OkStatus();
  const bool transport = st.error_code() == grpc::StatusCode::UNAVAILABLE ||
                         st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (transport && s.channel->GetState(false) != GRPC_CHANNEL_READY) {
    return absl::UnavailableError(absl::StrCat("cannot reach gateway at ", s.gateway, ": ",
                                               st.error_message(),
                                               " (set --gateway or RINGCACHE_GATEWAY)"));
  }
  if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(absl::StrCat("gateway at ", s.gateway,
                                                    " did not answer within ",
                                                    s.timeout.count() / 1000.0, " s (--timeout)"));
  }
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
}

void WriteGeometryJson(const v1::VdiGeometry& g, JsonWriter* j) {
  j->Field("name", g.name())
      .Field("id", g.vdi_id())
      .Field("size_bytes", g.size_bytes())
      .Field("object_size", g.object_size())
      .Field("block_size", g.block_size())
      .Field("replication", g.replication());
}

void WriteNodeJson(const v1::NodeInfo& n, JsonWriter* j) {
  j->BeginObject()
      .Field("role", n.role())
      .Field("id", n.id())
      .Field("address", n.address())
      .Field("capacity_bytes", n.capacity_bytes())
      .Field("zone", n.zone())
      .Field("state", n.state())
      .Field("release", n.release());
  if (n.usage_known()) {
    const v1::SsdWear& w = n.ssd_wear();
    j->Field("ssd_used_bytes", n.ssd_used_bytes())
        .Field("dirty_bytes", n.dirty_bytes())
        .Field("hit_ratio", n.hit_ratio())
        .Field("ssd_written_bytes", w.written_bytes());
    if (w.budget_bytes_per_day() > 0) {
      j->Field("ssd_budget_bytes_per_day", w.budget_bytes_per_day())
          .Field("ssd_budget_state", w.budget_state())
          .Field("ssd_budget_fill", w.budget_fill())
          .Field("ssd_write_rate", w.write_rate())
          .Field("ssd_life_days", w.life_days())
          .Field("ssd_budget_around", w.budget_around());
    }
  }
  j->EndObject();
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

namespace {

void PrintStatsJson(const v1::VdiStatsResponse& resp, std::ostream& out) {
  JsonWriter j;
  j.BeginArray();
  for (const auto& e : resp.vdis()) {
    const v1::VdiCacheStats& x = e.stats();
    j.BeginObject()
        .Field("vdi", e.vdi_name())
        .Field("mode", CacheModeName(x.mode()))
        .Field("policy", x.policy())
        .Field("hit_ratio", e.hit_ratio())
        .Field("hits_ram", x.hits_ram())
        .Field("hits_ssd", x.hits_ssd())
        .Field("misses", x.misses())
        .Field("bypassed", x.bypassed())
        .Field("reads", x.reads())
        .Field("writes", x.writes())
        .Field("ssd_writes", x.ssd_writes())
        .Field("queue_length", x.queue_length())
        .Field("max_length", x.max_length())
        .Field("upper_bound", x.upper_bound())
        .Field("lower_bound", x.lower_bound())
        .Field("dirty_bytes", x.dirty_bytes())
        .Field("oldest_dirty_ms", x.oldest_dirty_ms());
    if (x.has_admit_first()) j.Field("admit_first", x.admit_first());
    if (x.has_admit_bar()) j.Field("admit_bar", x.admit_bar());
    if (x.has_admit_region_margin()) j.Field("admit_region_margin", x.admit_region_margin());
    if (x.has_admit_budget_margin()) j.Field("admit_budget_margin", x.admit_budget_margin());
    j.EndObject();
  }
  j.EndArray();
  out << j.str() << '\n';
}

// The VDI's admission state: "62.0% first" (an adaptive sieve admits that share of first read
// misses), "bar 1.40" (the frequency gate's bar), "margin 3.0" (the region test's), "budget
// +1.0" (the write budget's margin), those that apply, or "-".
std::string AdmissionText(const v1::VdiCacheStats& x) {
  std::vector<std::string> parts;
  if (x.has_admit_first()) parts.push_back(FormatPercent(x.admit_first()) + " first");
  if (x.has_admit_bar()) parts.push_back("bar " + FormatFixed(x.admit_bar(), 2));
  if (x.has_admit_region_margin()) {
    parts.push_back("margin " + FormatFixed(x.admit_region_margin(), 1));
  }
  if (x.has_admit_budget_margin()) {
    parts.push_back("budget +" + FormatFixed(x.admit_budget_margin(), 1));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

// Queue length and L_m count cache blocks (docs/design.md §4, VBQ); U_i and D_i are fractions of
// L_m.
void PrintStatsTable(const v1::VdiStatsResponse& resp, std::ostream& out) {
  using A = Table::Align;
  Table t({{"VDI"},
           {"MODE"},
           {"HIT%", A::kRight},
           {"RAM_HITS", A::kRight},
           {"SSD_HITS", A::kRight},
           {"MISSES", A::kRight},
           {"BYPASSED", A::kRight},
           {"QUEUE", A::kRight},
           {"L_m", A::kRight},
           {"U_i", A::kRight},
           {"D_i", A::kRight},
           {"DIRTY", A::kRight},
           {"DIRTY_AGE", A::kRight},
           {"ADMISSION"},
           {"POLICY"}});
  for (const auto& e : resp.vdis()) {
    const v1::VdiCacheStats& x = e.stats();
    t.AddRow({e.vdi_name(), CacheModeName(x.mode()), FormatPercent(e.hit_ratio()),
              std::to_string(x.hits_ram()), std::to_string(x.hits_ssd()),
              std::to_string(x.misses()), std::to_string(x.bypassed()),
              std::to_string(x.queue_length()), FormatFixed(x.max_length(), 1),
              FormatFixed(x.upper_bound(), 3), FormatFixed(x.lower_bound(), 3),
              FormatBytes(x.dirty_bytes()),
              x.oldest_dirty_ms() > 0 ? FormatFixed(x.oldest_dirty_ms() / 1000.0, 1) + " s" : "-",
              AdmissionText(x), OrDash(x.policy())});
  }
  t.Render(out);
}

}  // namespace

AdminSession AdminSession::Connect(const std::string& gateway, std::ostream* out,
                                   std::ostream* err) {
  AdminSession s;
  s.gateway = gateway;
  s.out = out;
  s.err = err;
  // Mutual TLS with the admin certificate when ringcachectl was given --tls-dir.
  s.channel = grpc::CreateChannel(gateway, tls::ChannelCredentialsFor(tls::kRoleGateway));
  s.stub = v1::Admin::NewStub(s.channel);
  return s;
}

std::string CacheModeName(v1::CacheMode mode) {
  for (const auto& [m, name] : kModeNames) {
    if (m == mode) return name;
  }
  return "unspecified";
}

absl::StatusOr<v1::CacheMode> ParseCacheMode(const std::string& name) {
  for (const auto& [m, n] : kModeNames) {
    if (name == n) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown cache mode '", name, "' (writeback, writethrough, writearound, passthrough)"));
}

absl::Status CreateVdi(const AdminSession& s, const CreateVdiArgs& args) {
  v1::CreateVdiRequest req;
  req.set_name(args.name);
  req.set_size_bytes(args.size_bytes);
  req.set_object_size(args.object_size);
  req.set_replication(args.replication);
  v1::CreateVdiResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->CreateVdi(&ctx, req, &resp)); !st.ok()) return st;
  const v1::VdiGeometry& g = resp.vdi();
  if (s.json) {
    JsonWriter j;
    j.BeginObject();
    WriteGeometryJson(g, &j);
    j.EndObject();
    *s.out << j.str() << '\n';
  } else {
    *s.out << "created VDI " << g.name() << " (id " << g.vdi_id() << "): size "
           << FormatBytes(g.size_bytes()) << ", object " << FormatBytes(g.object_size())
           << ", block " << FormatBytes(g.block_size()) << ", replication " << g.replication()
           << '\n';
  }
  return absl::OkStatus();
}

absl::Status ListVdis(const AdminSession& s) {
  v1::ListVdisResponse list;
  {
    grpc::ClientContext ctx;
    SetDeadline(s, &ctx);
    absl::Status st = FromRpc(s, s.stub->ListVdis(&ctx, v1::ListVdisRequest(), &list));
    if (!st.ok()) return st;
  }
  // The cache mode, dirty bytes and hit ratio live with the cache nodes' statistics, not in the
  // geometry. The list comes from the catalog alone, so it is still printed ("?") when the
  // statistics are not.
  std::map<uint32_t, v1::VdiStatsEntry> stats_of;
  bool have_stats = false;
  {
    v1::VdiStatsResponse stats;
    grpc::ClientContext ctx;
    SetDeadline(s, &ctx);
    absl::Status st = FromRpc(s, s.stub->VdiStats(&ctx, v1::VdiStatsRequest(), &stats));
    if (st.ok()) {
      have_stats = true;
      for (const auto& e : stats.vdis()) stats_of[e.stats().vdi_id()] = e;
    } else if (s.err != nullptr) {
      *s.err << "ringcachectl: cache modes, dirty bytes and hit ratios unknown: " << st.message()
             << '\n';
    }
  }
  const v1::VdiStatsEntry* none = nullptr;
  auto stats_for = [&](uint32_t id) {
    auto it = stats_of.find(id);
    return it == stats_of.end() ? none : &it->second;
  };
  auto mode_of = [&](uint32_t id) {
    const v1::VdiStatsEntry* e = stats_for(id);
    return e != nullptr ? CacheModeName(e->stats().mode()) : have_stats ? "-" : "?";
  };
  auto access_of = [&](int i) {
    return i < list.access_size() ? list.access(i) : v1::VdiAccess();
  };
  if (s.json) {
    JsonWriter j;
    j.BeginArray();
    for (int i = 0; i < list.vdis_size(); ++i) {
      const v1::VdiGeometry& g = list.vdis(i);
      const v1::VdiAccess a = access_of(i);
      j.BeginObject();
      WriteGeometryJson(g, &j);
      j.Field("mode", mode_of(g.vdi_id()));
      j.Field("policy", a.policy());
      if (const v1::VdiStatsEntry* e = stats_for(g.vdi_id()); e != nullptr) {
        j.Field("dirty_bytes", e->stats().dirty_bytes());
        j.Field("hit_ratio", e->hit_ratio());
      }
      WriteAccessJson(a, &j);
      j.Key("qos");
      WriteQosJson(a.qos(), &j);
      j.EndObject();
    }
    j.EndArray();
    *s.out << j.str() << '\n';
    return absl::OkStatus();
  }
  if (list.vdis().empty()) {
    *s.out << "no VDIs (create one with: ringcachectl vdi create NAME --size 10G)\n";
    return absl::OkStatus();
  }
  using A = Table::Align;
  Table t({{"NAME"},
           {"ID", A::kRight},
           {"SIZE", A::kRight},
           {"OBJECT", A::kRight},
           {"BLOCK", A::kRight},
           {"REPLICAS", A::kRight},
           {"MODE"},
           {"DIRTY", A::kRight},
           {"HITS", A::kRight},
           {"ACCESS"},
           {"POLICY"}});
  for (int i = 0; i < list.vdis_size(); ++i) {
    const v1::VdiGeometry& g = list.vdis(i);
    const v1::VdiStatsEntry* e = stats_for(g.vdi_id());
    const std::string unknown = have_stats ? "-" : "?";
    t.AddRow({g.name(), std::to_string(g.vdi_id()), FormatBytes(g.size_bytes()),
              FormatBytes(g.object_size()), FormatBytes(g.block_size()),
              std::to_string(g.replication()), mode_of(g.vdi_id()),
              e != nullptr ? FormatBytes(e->stats().dirty_bytes()) : unknown,
              e != nullptr ? absl::StrFormat("%.1f%%", 100 * e->hit_ratio()) : unknown,
              FormatAccess(access_of(i)),
              access_of(i).policy().empty() ? "default" : access_of(i).policy()});
  }
  t.Render(*s.out);
  return absl::OkStatus();
}

absl::Status DeleteVdi(const AdminSession& s, const std::string& name) {
  v1::RemoveVdiRequest req;
  req.set_name(name);
  v1::RemoveVdiResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->DeleteVdi(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    *s.out << JsonWriter().BeginObject().Field("deleted", name).EndObject().str() << '\n';
  } else {
    *s.out << "deleted VDI " << name << '\n';
  }
  return absl::OkStatus();
}

absl::Status ResizeVdi(const AdminSession& s, const std::string& name, uint64_t size_bytes) {
  v1::ResizeVdiRequest req;
  req.set_name(name);
  req.set_size_bytes(size_bytes);
  v1::ResizeVdiResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->ResizeVdi(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    JsonWriter j;
    j.BeginObject();
    WriteGeometryJson(resp.vdi(), &j);
    j.EndObject();
    *s.out << j.str() << '\n';
  } else {
    *s.out << "resized VDI " << resp.vdi().name() << " to " << FormatBytes(resp.vdi().size_bytes())
           << " (" << resp.vdi().size_bytes() << " bytes)\n";
  }
  return absl::OkStatus();
}

std::string FormatAccess(const v1::VdiAccess& a) {
  if (a.public_export()) return absl::StrCat(a.read_only() ? "ro" : "rw", " public");
  std::string clients = "any-identity";
  if (!a.allowed_clients().empty() || !a.read_only_clients().empty()) {
    std::vector<std::string> ids(a.allowed_clients().begin(), a.allowed_clients().end());
    for (const std::string& c : a.read_only_clients()) ids.push_back(c + "(ro)");
    clients = absl::StrJoin(ids, ",");
  }
  return absl::StrCat(a.read_only() ? "ro" : "rw", " ", clients);
}

void WriteAccessJson(const v1::VdiAccess& a, JsonWriter* j) {
  j->Field("read_only", a.read_only()).Field("public", a.public_export());
  j->Key("allowed_clients").BeginArray();
  for (const std::string& c : a.allowed_clients()) j->String(c);
  j->EndArray().Key("read_only_clients").BeginArray();
  for (const std::string& c : a.read_only_clients()) j->String(c);
  j->EndArray();
}

absl::Status SetVdiAccess(const AdminSession& s, const VdiAccessArgs& args) {
  v1::SetVdiAccessRequest req;
  req.set_name(args.name);
  if (args.read_only) req.set_read_only(*args.read_only);
  if (args.allowed_clients) {
    req.set_set_allowed_clients(true);
    for (const std::string& c : *args.allowed_clients) req.add_allowed_clients(c);
  }
  if (args.public_export) req.set_public_export(*args.public_export);
  req.set_allow_client(args.allow);
  req.set_allow_read_only(args.allow_read_only);
  req.set_deny_client(args.deny);
  v1::SetVdiAccessResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->SetVdiAccess(&ctx, req, &resp)); !st.ok()) return st;
  const v1::VdiAccess& a = resp.access();
  if (s.json) {
    JsonWriter j;
    j.BeginObject().Field("name", a.name());
    WriteAccessJson(a, &j);
    j.EndObject();
    *s.out << j.str() << '\n';
  } else {
    *s.out << "VDI " << a.name() << ": access " << FormatAccess(a) << '\n';
  }
  return absl::OkStatus();
}

absl::Status SetVdiMode(const AdminSession& s, const std::string& name, v1::CacheMode mode) {
  v1::SetVdiModeRequest req;
  req.set_name(name);
  req.set_mode(mode);
  v1::SetVdiModeResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->SetVdiMode(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    *s.out << JsonWriter()
                  .BeginObject()
                  .Field("name", name)
                  .Field("mode", CacheModeName(mode))
                  .EndObject()
                  .str()
           << '\n';
  } else {
    *s.out << "VDI " << name << ": cache mode " << CacheModeName(mode) << '\n';
  }
  return absl::OkStatus();
}

absl::Status SetVdiPolicy(const AdminSession& s, const std::string& name,
                          const std::string& policy) {
  v1::SetVdiPolicyRequest req;
  req.set_name(name);
  req.set_policy(policy);
  v1::SetVdiPolicyResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->SetVdiPolicy(&ctx, req, &resp)); !st.ok()) return st;
  const std::string shown = policy.empty() || policy == "default" ? "default" : policy;
  if (s.json) {
    *s.out << JsonWriter().BeginObject().Field("name", name).Field("policy", shown).EndObject().str()
           << '\n';
  } else {
    *s.out << "VDI " << name << ": cache policy " << shown << '\n';
  }
  return absl::OkStatus();
}

absl::Status InvalidateVdi(const AdminSession& s, const std::string& name, bool flush) {
  v1::InvalidateCacheRequest req;
  req.set_vdi_name(name);
  req.set_flush(flush);
  v1::InvalidateCacheResponse resp;
  grpc::ClientContext ctx;
  // With --flush the destage comes first: allow as long as a flush may take.
  ctx.set_deadline(std::chrono::system_clock::now() +
                   (flush ? std::max<std::chrono::milliseconds>(s.timeout, std::chrono::hours(1))
                          : s.timeout));
  if (absl::Status st = FromRpc(s, s.stub->InvalidateVdi(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    *s.out << JsonWriter()
                  .BeginObject()
                  .Field("vdi", name)
                  .Field("dropped_blocks", resp.dropped_blocks())
                  .Field("dirty_blocks_kept", resp.dirty_blocks_kept())
                  .Field("cache_nodes", resp.cache_nodes())
                  .EndObject()
                  .str()
           << '\n';
    return absl::OkStatus();
  }
  *s.out << "VDI " << name << ": " << resp.dropped_blocks() << " clean cached blocks dropped on "
         << resp.cache_nodes() << " cache nodes";
  if (resp.dirty_blocks_kept() > 0) {
    *s.out << "; " << resp.dirty_blocks_kept() << " blocks written meanwhile stay (dirty)";
  }
  *s.out << '\n';
  return absl::OkStatus();
}

absl::Status ClusterStatus(const AdminSession& s) {
  v1::ClusterStatusResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  absl::Status st = FromRpc(s, s.stub->ClusterStatus(&ctx, v1::ClusterStatusRequest(), &resp));
  if (!st.ok()) return st;
  const Health health = ClusterHealth(resp);
  if (s.json) {
    JsonWriter j;
    j.BeginObject().Key("health").BeginObject().Field("status", health.level);
    j.Key("reasons").BeginArray();
    for (const std::string& why : health.reasons) j.String(why);
    j.EndArray().EndObject();
    j.Field("epoch", resp.epoch())
        .Field("coordinator", resp.coordinator())
        .Field("answered_by_coordinator", resp.answered_by_coordinator())
        .Key("nodes")
        .BeginArray();
    for (const auto& n : resp.nodes()) WriteNodeJson(n, &j);
    j.EndArray().Key("cache_ring").BeginArray();
    for (const auto& m : resp.cache_ring()) {
      j.BeginObject().Field("id", m.id()).Field("weight", m.weight()).EndObject();
    }
    j.EndArray().Field("vdis", resp.vdis()).Field("dirty_bytes", resp.dirty_bytes());
    const v1::DataRebalance& r = resp.rebalance();
    j.Key("rebalance").BeginObject().Field("state", r.state().empty() ? "idle" : r.state());
    j.Field("data_epoch", r.data_epoch()).Key("members").BeginArray();
    for (uint32_t id : r.members()) j.Uint(id);
    j.EndArray().Key("target").BeginArray();
    for (uint32_t id : r.target()) j.Uint(id);
    j.EndArray()
        .Field("blocks_scanned", r.blocks_scanned())
        .Field("blocks_estimated", r.blocks_estimated())
        .Field("blocks_copied", r.blocks_copied())
        .Field("blocks_deleted", r.blocks_deleted())
        .Field("eta_seconds", r.eta_seconds())
        .Field("limit_mb_s", r.limit_mb_s())
        .Field("paced_for_clients", r.paced_for_clients())
        .Field("reason", r.reason())
        .Field("message", r.message());
    j.Key("out").BeginArray();
    for (uint32_t id : r.out()) j.Uint(id);
    j.EndArray()
        .EndObject()
        .EndObject();
    *s.out << j.str() << '\n';
    return absl::OkStatus();
  }
  // "5 (2 cachenode, 3 datanode); 5 up" — roles and states in name order.
  std::map<std::string, int> roles, states;
  for (const auto& n : resp.nodes()) {
    ++roles[OrDash(n.role())];
    ++states[OrDash(n.state())];
  }
  auto join = [](const std::map<std::string, int>& m) {
    std::string out;
    for (const auto& [name, count] : m) {
      absl::StrAppend(&out, out.empty() ? "" : ", ", count, " ", name);
    }
    return out;
  };
  std::string nodes = std::to_string(resp.nodes_size());
  if (resp.nodes_size() > 0) absl::StrAppend(&nodes, " (", join(roles), "); ", join(states));
  // "rebalance: copying to data ring 1,2,3,4 (epoch 5): 1200 of ~3000 blocks scanned, 400
  // copied, 0 deleted" or "rebalance: idle (data ring 1,2,3,4, epoch 6)".
  const v1::DataRebalance& r = resp.rebalance();
  const std::string state = r.state().empty() ? "idle" : r.state();
  std::string rebalance;
  if (state == "idle") {
    rebalance = absl::StrCat("idle (data ring ", absl::StrJoin(r.members(), ","), ", epoch ",
                             r.data_epoch(), ")");
    if (r.blocks_copied() + r.blocks_deleted() > 0) {
      absl::StrAppend(&rebalance, "; last move: ", r.blocks_copied(), " blocks copied, ",
                      r.blocks_deleted(), " deleted");
    }
  } else {
    rebalance = absl::StrCat(state, " from data ring ", absl::StrJoin(r.members(), ","),
                             r.target_size() > 0 ? " to " : "", absl::StrJoin(r.target(), ","),
                             " (epoch ", r.data_epoch(), "): ", r.blocks_scanned(), " of ~",
                             r.blocks_estimated(), " blocks scanned, ", r.blocks_copied(),
                             " copied, ", r.blocks_deleted(), " deleted");
    if (r.blocks_estimated() > 0) {
      absl::StrAppend(&rebalance, absl::StrFormat(" (%.0f%%", 100.0 * std::min<double>(
                                                      1.0, static_cast<double>(r.blocks_scanned()) /
                                                               r.blocks_estimated())));
      if (r.eta_seconds() > 0) {
        absl::StrAppend(&rebalance, ", ",
                        absl::FormatDuration(absl::Seconds(std::ceil(r.eta_seconds()))), " left");
      }
      if (r.limit_mb_s() > 0) {
        absl::StrAppend(&rebalance, absl::StrFormat(", %.0f MB/s", r.limit_mb_s()),
                        r.paced_for_clients() ? " while clients are served" : "");
      }
      absl::StrAppend(&rebalance, ")");
    }
    if (!r.reason().empty()) absl::StrAppend(&rebalance, " [", r.reason(), "]");
  }
  if (r.out_size() > 0) {
    absl::StrAppend(&rebalance, "; out: data node", r.out_size() > 1 ? "s " : " ",
                    absl::StrJoin(r.out(), ","));
  }
  if (!r.message().empty()) absl::StrAppend(&rebalance, "; ", r.message());
  std::vector<std::pair<std::string, std::string>> fields = {
      {"health", health.Line()}, {"epoch", std::to_string(resp.epoch())}};
  if (!resp.coordinator().empty()) {
    fields.push_back({"coordinator", absl::StrCat(resp.coordinator(),
                                                  resp.answered_by_coordinator()
                                                      ? " (this gateway)"
                                                      : " (answered by another gateway)")});
  }
  // "1 (1), 2 (2.5)": the cache nodes objects are routed over, with their ring weights.
  std::vector<std::string> ring;
  for (const auto& m : resp.cache_ring()) ring.push_back(absl::StrCat(m.id(), " (", m.weight(), ")"));
  fields.insert(fields.end(), {{"nodes", nodes},
                               {"cache ring", ring.empty() ? "-" : absl::StrJoin(ring, ", ")},
                               {"VDIs", std::to_string(resp.vdis())},
                               {"dirty", FormatBytes(resp.dirty_bytes())},
                               {"rebalance", rebalance}});
  RenderFields(fields, *s.out);
  return absl::OkStatus();
}

absl::Status VdiStats(const AdminSession& s, const std::string& vdi) {
  v1::VdiStatsRequest req;
  req.set_vdi_name(vdi);
  v1::VdiStatsResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->VdiStats(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    PrintStatsJson(resp, *s.out);
  } else if (resp.vdis().empty()) {
    *s.out << "no VDIs\n";
  } else {
    PrintStatsTable(resp, *s.out);
  }
  return absl::OkStatus();
}

absl::Status Flush(const AdminSession& s, const std::string& vdi) {
  v1::FlushRequest req;
  req.set_vdi_name(vdi);
  grpc::ClientContext ctx;  // no deadline: a large destage takes as long as it takes
  std::unique_ptr<grpc::ClientReaderInterface<v1::FlushProgress>> reader = s.stub->Flush(&ctx, req);
  const std::string what = vdi.empty() ? "all VDIs" : "VDI " + vdi;
  v1::FlushProgress p;
  bool done = false;
  uint64_t total = 0;  // the dirty bytes of the first report (the peak, if more came)
  while (reader->Read(&p)) {
    total = std::max(total, p.dirty_bytes_left());
    const Progress progress = ProgressOf(total, p.dirty_bytes_left(), p.bytes_per_second());
    if (s.json) {
      *s.out << JsonWriter()
                    .BeginObject()
                    .Field("dirty_bytes_left", p.dirty_bytes_left())
                    .Field("dirty_blocks_left", p.dirty_blocks_left())
                    .Field("bytes_per_second", p.bytes_per_second())
                    .Field("percent_done", 100 * progress.done)
                    .Field("eta_seconds", progress.eta_seconds)
                    .Field("done", p.done())
                    .EndObject()
                    .str()
             << std::endl;  // flush each report so a pipe sees it as it happens
    } else if (p.done()) {
      *s.out << "flush of " << what << ": done" << std::endl;
    } else {
      *s.out << "flush of " << what << ": "
             << FormatDirtyProgress(total, p.dirty_bytes_left(), p.bytes_per_second())
             << std::endl;
    }
    done = done || p.done();
  }
  if (absl::Status st = FromRpc(s, reader->Finish()); !st.ok()) return st;
  if (!done) {
    return absl::UnavailableError(
        absl::StrCat("the flush stream from ", s.gateway, " ended before reporting done"));
  }
  return absl::OkStatus();
}

}  // namespace ringcache::ctl
