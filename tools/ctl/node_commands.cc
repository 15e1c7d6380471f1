// The node commands of ringcachectl (commands.h): node list, drain, remove and undrain, the data
// nodes' out / in / decommission, and the scrub.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/format.h"
#include "tools/ctl/rpc.h"

namespace ringcache::ctl {

absl::Status ListNodes(const AdminSession& s) {
  v1::ListNodesResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  absl::Status st = FromRpc(s, s.stub->ListNodes(&ctx, v1::ListNodesRequest(), &resp));
  if (!st.ok()) return st;
  if (s.json) {
    JsonWriter j;
    j.BeginArray();
    for (const auto& n : resp.nodes()) WriteNodeJson(n, &j);
    j.EndArray();
    *s.out << j.str() << '\n';
    return absl::OkStatus();
  }
  // Cache nodes add what they hold: SSD used, dirty bytes, hit ratio since they started ("-"
  // until the gateway's health watch heard from them, and for other roles).
  using A = Table::Align;
  Table t({{"ROLE"},
           {"ID", A::kRight},
           {"ADDRESS"},
           {"CAPACITY", A::kRight},
           {"SSD_USED", A::kRight},
           {"DIRTY", A::kRight},
           {"HIT%", A::kRight},
           {"WRITTEN", A::kRight},
           {"BUDGET", A::kRight},
           {"LIFE", A::kRight},
           {"ZONE"},
           {"RELEASE"},
           {"STATE"}});
  // Their SSD's wear: bytes written since wear records began; with a write budget its state and
  // its bucket's fill ("tight 31%"), and the rating's life left at the current write rate.
  for (const auto& n : resp.nodes()) {
    const bool u = n.usage_known();
    const v1::SsdWear& w = n.ssd_wear();
    const bool budget = u && w.budget_bytes_per_day() > 0;
    t.AddRow({n.role(), std::to_string(n.id()), OrDash(n.address()),
              n.capacity_bytes() > 0 ? FormatBytes(n.capacity_bytes()) : "-",
              u ? FormatBytes(n.ssd_used_bytes()) : "-", u ? FormatBytes(n.dirty_bytes()) : "-",
              u ? FormatPercent(n.hit_ratio()) : "-", u ? FormatBytes(w.written_bytes()) : "-",
              budget ? absl::StrCat(w.budget_state(), " ",
                                    FormatPercent(std::max(0.0, w.budget_fill())))
                     : std::string(u ? "none" : "-"),
              budget && w.life_days() >= 0 ? absl::StrFormat("%.0fd", w.life_days())
                                           : std::string("-"),
              OrDash(n.zone()), OrDash(n.release()), OrDash(n.state())});
  }
  t.Render(*s.out);
  return absl::OkStatus();
}

absl::Status RemoveNode(const AdminSession& s, const std::string& verb, const std::string& role,
                        uint32_t id) {
  v1::RemoveNodeRequest req;
  req.set_role(role);
  req.set_id(id);
  v1::RemoveNodeResponse resp;
  grpc::ClientContext ctx;
  // Removal waits for requests in flight and destages or replays the node's dirty data: allow
  // far longer than an ordinary answer.
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::max<std::chrono::milliseconds>(s.timeout, std::chrono::minutes(15)));
  // The removal is one call; meanwhile the gateway samples the node's dirty bytes into its node
  // list, which a second call reads every second to show the drain's progress (text output).
  absl::Mutex mu;
  bool finished = false;
  grpc::Status rpc;
  std::thread call([&] {
    grpc::Status r = s.stub->RemoveNode(&ctx, req, &resp);
    absl::MutexLock l(&mu);
    rpc = r;
    finished = true;
  });
  std::string last;
  const absl::Time started = absl::Now();
  for (;;) {
    {
      absl::MutexLock l(&mu);
      auto done = [&finished]() { return finished; };
      if (mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(1))) break;
    }
    if (s.json || role != "cachenode") continue;
    v1::ListNodesResponse nodes;
    grpc::ClientContext lctx;
    SetDeadline(s, &lctx);
    if (!s.stub->ListNodes(&lctx, v1::ListNodesRequest(), &nodes).ok()) continue;
    for (const auto& n : nodes.nodes()) {
      if (n.role() != role || n.id() != id || n.progress().empty()) continue;
      const double secs = absl::ToDoubleSeconds(absl::Now() - started);
      const uint64_t gone = n.drain_dirty_bytes_start() - std::min(n.drain_dirty_bytes_start(),
                                                                    n.drain_dirty_bytes_left());
      std::string line = absl::StrCat(role, " ", id, ": ", n.progress());
      if (n.drain_dirty_bytes_start() > 0 || n.drain_dirty_bytes_left() > 0) {
        line += ", " + FormatDirtyProgress(n.drain_dirty_bytes_start(),
                                           n.drain_dirty_bytes_left(), secs > 0 ? gone / secs : 0);
      }
      if (line != last) *s.out << line << std::endl;
      last = line;
    }
  }
  call.join();
  if (absl::Status st = FromRpc(s, rpc); !st.ok()) return st;
  if (s.json) {
    *s.out << JsonWriter()
                  .BeginObject()
                  .Field("role", role)
                  .Field("id", id)
                  .Field("action", verb)
                  .EndObject()
                  .str()
           << '\n';
  } else if (role == "datanode") {
    *s.out << "data node " << id
           << ": decommissioning: its replicas move to the other data nodes, then it leaves the "
              "ring (see `ringcachectl status`)\n";
  } else if (verb == "drain") {
    *s.out << role << ' ' << id << ": drained and removed from the ring\n";
  } else {
    *s.out << role << ' ' << id << ": removed; its dirty data was destaged or replayed home\n";
  }
  return absl::OkStatus();
}

absl::Status UndrainNode(const AdminSession& s, const std::string& role, uint32_t id) {
  v1::UndrainNodeRequest req;
  req.set_role(role);
  req.set_id(id);
  v1::UndrainNodeResponse resp;
  grpc::ClientContext ctx;
  // A join waits for the moving objects' destage on the other nodes: allow for it.
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::max<std::chrono::milliseconds>(s.timeout, std::chrono::minutes(5)));
  if (absl::Status st = FromRpc(s, s.stub->UndrainNode(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    *s.out << JsonWriter()
                  .BeginObject()
                  .Field("role", role)
                  .Field("id", id)
                  .Field("action", "undrain")
                  .Field("state", resp.state())
                  .Field("message", resp.message())
                  .EndObject()
                  .str()
           << '\n';
  } else {
    *s.out << resp.message() << '\n';
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<v1::ResizeTiersResponse> AskResize(const AdminSession& s, uint32_t id,
                                                  uint64_t ssd_bytes, uint64_t ram_bytes,
                                                  bool keep_weight = false) {
  v1::ResizeNodeRequest req;
  req.set_id(id);
  req.set_ssd_bytes(ssd_bytes);
  req.set_ram_bytes(ram_bytes);
  req.set_keep_weight(keep_weight);
  v1::ResizeTiersResponse resp;
  grpc::ClientContext ctx;
  // A growth writes the new slots' index entries; the policy rebuild passes every block.
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::max<std::chrono::milliseconds>(s.timeout, std::chrono::minutes(2)));
  if (absl::Status st = FromRpc(s, s.stub->ResizeNode(&ctx, req, &resp)); !st.ok()) return st;
  return resp;
}

}  // namespace

absl::Status ResizeNode(const AdminSession& s, uint32_t id, uint64_t ssd_bytes,
                        uint64_t ram_bytes, bool wait, bool keep_weight) {
  absl::StatusOr<v1::ResizeTiersResponse> r = AskResize(s, id, ssd_bytes, ram_bytes, keep_weight);
  if (!r.ok()) return r.status();
  // Why the ring weight did not follow the new size (the answers of the polls below have none).
  const std::string note = r->ring_weight_note();
  if (!note.empty()) *s.err << "cache node " << id << ": ring weight unchanged: " << note << '\n';
  absl::Time next = absl::Now();
  while (wait && r->target_bytes() != 0) {
    if (absl::Now() >= next) {
      *s.err << "cache node " << id << ": shrinking to " << FormatBytes(r->target_bytes())
             << ": " << r->blocks_to_move() << " blocks still to move out\n";
      next = absl::Now() + absl::Seconds(5);
    }
    absl::SleepFor(absl::Milliseconds(200));
    r = AskResize(s, id, 0, 0);
    if (!r.ok()) return r.status();
  }
  if (s.json) {
    *s.out << JsonWriter()
                  .BeginObject()
                  .Field("id", id)
                  .Field("ssd_bytes", r->ssd_bytes())
                  .Field("file_bytes", r->file_bytes())
                  .Field("target_bytes", r->target_bytes())
                  .Field("blocks_to_move", r->blocks_to_move())
                  .Field("ram_bytes", r->ram_bytes())
                  .Field("ram_used_bytes", r->ram_used_bytes())
                  .Field("ring_weight", r->ring_weight())
                  .Field("ring_weight_note", note)
                  .EndObject()
                  .str()
           << '\n';
    return absl::OkStatus();
  }
  if (r->target_bytes() != 0) {
    *s.out << "cache node " << id << ": SSD tier shrinking to " << FormatBytes(r->target_bytes())
           << " (" << r->blocks_to_move()
           << " blocks still to move out of the released slots; `ringcachectl node resize " << id
           << " --ssd " << r->target_bytes() << "` again follows it)";
  } else {
    *s.out << "cache node " << id << ": SSD tier is " << FormatBytes(r->ssd_bytes());
  }
  if (r->ram_bytes() != 0) {
    *s.out << ", RAM tier " << FormatBytes(r->ram_bytes()) << " ("
           << FormatBytes(r->ram_used_bytes()) << " in use)";
  }
  *s.out << ", ring weight " << r->ring_weight() << '\n';
  return absl::OkStatus();
}

absl::Status DataNodeAction(const AdminSession& s, const std::string& action, uint32_t id) {
  v1::DataNodeActionRequest req;
  req.set_id(id);
  req.set_action(action);
  v1::DataNodeActionResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->DataNodeAction(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    *s.out << JsonWriter()
                  .BeginObject()
                  .Field("id", id)
                  .Field("action", action)
                  .Field("message", resp.message())
                  .EndObject()
                  .str()
           << '\n';
  } else {
    *s.out << resp.message() << '\n';
  }
  return absl::OkStatus();
}

absl::Status Scrub(const AdminSession& s, bool start) {
  v1::ClusterScrubRequest req;
  req.set_start(start);
  v1::ClusterScrubStatus resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  if (absl::Status st = FromRpc(s, s.stub->Scrub(&ctx, req, &resp)); !st.ok()) return st;
  if (s.json) {
    JsonWriter j;
    j.BeginObject().Key("nodes").BeginArray();
    for (const auto& n : resp.nodes()) {
      j.BeginObject()
          .Field("id", n.node_id())
          .Field("running", n.running())
          .Field("passes", n.passes())
          .Field("bytes_this_pass", n.bytes_this_pass())
          .Field("bytes_last_pass", n.bytes_last_pass())
          .Field("last_pass_end_unix", static_cast<uint64_t>(n.last_pass_end_unix()))
          .Field("blocks_checked", n.blocks_checked())
          .Field("log_records_checked", n.log_records_checked())
          .Field("damaged_blocks_found", n.damaged_blocks_found())
          .Field("damaged_log_records_found", n.damaged_log_records_found())
          .Field("open", static_cast<uint64_t>(n.open_size()))
          .Field("error", n.error())
          .EndObject();
    }
    j.EndArray().Key("unreachable").BeginArray();
    for (uint32_t id : resp.unreachable()) j.Uint(id);
    j.EndArray().Key("damaged_vdis").BeginArray();
    for (const auto& v : resp.damaged_vdis()) j.String(v);
    j.EndArray()
        .Field("blocks_repaired", resp.blocks_repaired())
        .Field("log_records_relogged", resp.log_records_relogged())
        .Field("unrepairable_blocks", resp.unrepairable_blocks())
        .Field("message", resp.message())
        .EndObject();
    *s.out << j.str() << '\n';
    return absl::OkStatus();
  }
  Table t({{"DATANODE"}, {"STATE"}, {"PASSES"}, {"CHECKED"}, {"LAST PASS"}, {"DAMAGED FOUND"},
           {"OPEN"}});
  for (const auto& n : resp.nodes()) {
    std::string state = n.running() ? "scrubbing" : "idle";
    if (n.running() && n.bytes_last_pass() > 0) {
      absl::StrAppend(&state, " ", FormatPercent(std::min<double>(
                                       1.0, static_cast<double>(n.bytes_this_pass()) /
                                                n.bytes_last_pass())));
    }
    if (!n.error().empty()) state = "error: " + n.error();
    t.AddRow({std::to_string(n.node_id()), state, std::to_string(n.passes()),
              absl::StrCat(n.blocks_checked(), " blocks, ", n.log_records_checked(), " records"),
              n.last_pass_end_unix() > 0
                  ? absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixSeconds(n.last_pass_end_unix()),
                                     absl::UTCTimeZone())
                  : "-",
              absl::StrCat(n.damaged_blocks_found(), " blocks, ", n.damaged_log_records_found(),
                           " records"),
              std::to_string(n.open_size())});
  }
  for (uint32_t id : resp.unreachable()) {
    t.AddRow({std::to_string(id), "unreachable", "-", "-", "-", "-", "-"});
  }
  t.Render(*s.out);
  *s.out << "repaired: " << resp.blocks_repaired() << " blocks rewritten from a good replica, "
         << resp.log_records_relogged() << " log records logged again\n";
  if (resp.unrepairable_blocks() > 0) {
    *s.out << "DAMAGED: " << resp.unrepairable_blocks()
           << " blocks have no good copy left (they read as I/O errors); VDIs: "
           << absl::StrJoin(resp.damaged_vdis(), ", ") << '\n';
  }
  if (!resp.message().empty()) *s.out << "last problem: " << resp.message() << '\n';
  if (start) *s.out << "scrub started on every data node that answered\n";
  return absl::OkStatus();
}

}  // namespace ringcache::ctl
