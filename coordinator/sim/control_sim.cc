// The control plane simulation (control_sim.h): the event loop, clients and the data path,
// faults, and the final check. The coordinator side is in sim_coordinator.cc.
#include "coordinator/sim/control_sim.h"

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "coordinator/sim/sim_cluster.h"

namespace ringcache::coordinator::sim {
namespace internal {

absl::Status Sim::CheckTerm(uint64_t* held, uint64_t term) {
  if (term != 0 && term < *held && !o_.no_term_fence) {
    ++res_.steps_refused;
    return TypedError(ErrorKind::kStaleTerm, absl::StrCat("stale coordinator term ", term));
  }
  *held = std::max(*held, term);
  return absl::OkStatus();
}

void Sim::Check() {
  // Runs after every event: the objects not durable at home first, then, only if there are any,
  // one pass over the logs for the newest logged version of each (not a pass per object).
  if (!durability_changed_) return;
  durability_changed_ = false;
  std::vector<int> unsettled;
  for (size_t obj = 0; obj < acked_.size(); ++obj) {
    const uint64_t a = acked_[obj];
    if (a == 0) continue;
    const auto home = home_.find(static_cast<int>(obj));
    if (home == home_.end() || home->second.v < a) unsettled.push_back(static_cast<int>(obj));
  }
  if (unsettled.empty()) return;
  std::vector<uint64_t> logged(acked_.size(), 0);
  for (int j = 0; j < kDataNodes; ++j) {
    for (const auto& [key, r] : dn_[j].log) {
      if (r.obj >= 0 && static_cast<size_t>(r.obj) < logged.size()) {
        logged[r.obj] = std::max(logged[r.obj], r.v);
      }
    }
  }
  for (int obj : unsettled) {
    if (logged[obj] < acked_[obj]) {
      Fail(absl::StrCat("object ", obj, ": acknowledged version ", acked_[obj],
                        " is neither home nor in any log record"));
    }
  }
}

// ---- clients and the data path ----

void Sim::Client() {
  if (!load_) return;
  const int obj = I(0, o_.objects - 1);
  if (!busy_[obj]) {
    busy_[obj] = true;
    Write w{obj, ++issued_[obj], I(0, kGateways - 1)};
    ++gw_[w.gw].outstanding;
    At(Gw(w.gw), 0, [this, w] { GwWrite(w, 0); });
  }
  At(-1, U(0.005, 0.05), [this] { Client(); });
}

void Sim::GwWrite(const Write& w, int attempt) {
  if (!res_.ok) return;
  Gateway& g = gw_[w.gw];
  const uint32_t owner = Route(g.view, w.obj);
  if (owner == 0) {  // held while its owner changes
    At(Gw(w.gw), 0.05, [this, w, attempt] { GwWrite(w, attempt + 1); });
    return;
  }
  const uint64_t epoch = g.view.epoch;
  StatusCall(
      Gw(w.gw), Cn(owner),
      [this, owner, w, epoch](Reply reply) { CnWrite(owner, w, epoch, std::move(reply)); },
      [this, w, attempt, owner](absl::Status s) {
        if (s.ok()) {
          Log("gw", w.gw, " ack obj ", w.obj, " v", w.v, " via cn", owner);
          acked_[w.obj] = std::max(acked_[w.obj], w.v);
          durability_changed_ = true;
          busy_[w.obj] = false;
          --gw_[w.gw].outstanding;
          ++res_.writes_acked;
          return;
        }
        // Fenced, stale, no answer: re-routed once the gateway follows the next ring.
        At(Gw(w.gw), 0.1, [this, w, attempt] { GwWrite(w, attempt + 1); });
      });
}

void Sim::CnWrite(uint32_t id, Write w, uint64_t req_epoch, Reply reply) {
  CacheNode& n = Node(id);
  if (!Owns(n)) return reply(TypedError(ErrorKind::kFenced, "fenced"));
  if (req_epoch < n.epoch) return reply(TypedError(ErrorKind::kStaleEpoch, "stale epoch"));
  // A late copy of an older attempt of this object (the model's client has one write of an
  // object in flight at a time): already superseded here.
  const uint64_t have = n.dirty.contains(w.obj) ? n.dirty[w.obj].v
                        : n.clean.contains(w.obj) ? n.clean[w.obj] : 0;
  if (w.v < have) return reply(absl::OkStatus());
  n.epoch = std::max(n.epoch, req_epoch);
  ++n.running[req_epoch];
  const Version ver{n.epoch, n.next_seq++, id, w.v};
  const uint64_t inc = incarnation_[Cn(id)];
  auto pending = std::make_shared<int>(2);
  auto failed = std::make_shared<absl::Status>();
  const Rec rec{w.obj, w.v, ver.epoch, ver.seq};
  for (int k = 0; k < 2; ++k) {
    const int j = (w.obj + k) % kDataNodes;
    StatusCall(
        Cn(id), Dn(j),
        [this, j, id, rec](Reply r) {
          DataNode& d = dn_[j];
          if (!o_.no_log_seal && d.seal.contains(id) && rec.epoch < d.seal[id]) {
            ++res_.appends_sealed;
            return r(TypedError(ErrorKind::kLogSealed, "log sealed"));
          }
          d.log[{id, rec.seq}] = rec;
          durability_changed_ = true;
          r(absl::OkStatus());
        },
        [this, id, w, req_epoch, ver, inc, pending, failed, reply](absl::Status s) {
          if (!s.ok()) *failed = s;
          if (--*pending > 0 || incarnation_[Cn(id)] != inc) return;
          CacheNode& n = Node(id);
          if (--n.running[req_epoch] == 0) n.running.erase(req_epoch);
          if (!failed->ok()) return reply(TypedError(ErrorKind::kFenced, failed->message()));
          // Ownership again, now that the log copies are durable.
          if (!Owns(n)) return reply(TypedError(ErrorKind::kFenced, "lost ownership"));
          auto& slot = n.dirty[w.obj];
          const uint64_t superseded = slot.v != 0 && slot.v < w.v ? slot.seq : 0;
          if (w.v >= slot.v) slot = ver;
          n.clean.erase(w.obj);
          auto [it, fresh] = owner_at_.try_emplace({w.obj, ver.epoch}, id);
          if (!fresh && it->second != id) {
            Fail(absl::StrCat("object ", w.obj, " taken by cache nodes ", it->second, " and ", id,
                              " at ring epoch ", ver.epoch));
          }
          Log("cn", id, " took obj ", w.obj, " v", w.v, " epoch ", ver.epoch, " seq ", ver.seq,
              " from gw", w.gw, " at ring epoch ", req_epoch);
          if (superseded != 0) Reclaim(id, superseded, w.obj, 0);
          reply(absl::OkStatus());
        });
  }
}

void Sim::ApplyHome(uint32_t writer, const Version& v, int obj) {
  (void)writer;
  Version& h = home_[obj];
  if (v.key() > h.key()) h = v;
  durability_changed_ = true;
}

// Drops log record `seq` of `writer` (for `obj`: its two log holders) on the data nodes.
void Sim::Reclaim(uint32_t writer, uint64_t seq, int obj, uint64_t term) {
  for (int k = 0; k < 2; ++k) {
    const int j = (obj + k) % kDataNodes;
    Send(Cn(writer), Dn(j), [this, j, writer, seq, term] {
      DataNode& d = dn_[j];
      if (!CheckTerm(&d.term, term).ok()) return;
      d.log.erase({writer, seq});
      durability_changed_ = true;
    });
  }
}

void Sim::Destage(uint32_t id) {
  CacheNode& n = Node(id);
  At(Cn(id), U(0.1, 0.3), [this, id] { Destage(id); });
  if (!Owns(n) || n.dirty.empty()) return;
  const auto [obj, ver] = *n.dirty.begin();
  StatusCall(
      Cn(id), Dn(obj % kDataNodes),
      [this, id, ver, obj](Reply r) {
        ApplyHome(id, ver, obj);  // conditional: an older version changes nothing
        r(absl::OkStatus());
      },
      [this, id, obj, ver](absl::Status s) {
        CacheNode& n = Node(id);
        if (!s.ok() || !n.dirty.contains(obj) || n.dirty[obj].seq != ver.seq) return;
        n.dirty.erase(obj);
        n.clean[obj] = ver.v;
        Reclaim(id, ver.seq, obj, 0);
      });
}

// ---- faults ----

void Sim::Crash(uint32_t id) {
  const int p = Cn(id);
  if (down_[p]) return;
  Log("FAULT crash cn", id);
  down_[p] = true;
  paused_[p] = false;
  for (uint32_t timer : held_[p]) Release(timer);
  held_[p].clear();
  ++incarnation_[p];
  CacheNode& n = Node(id);
  n.running.clear();
  n.lease_until = -1;
  n.lease = 0;
}

void Sim::Restart(uint32_t id) {
  const int p = Cn(id);
  if (!down_[p]) return;
  Log("restart cn", id);
  down_[p] = false;
  CacheNode& n = Node(id);
  // Cluster mode: a run that held a lease starts quarantined (docs/durability.md).
  if (n.held_lease) n.quarantined = true;
  At(p, 0, [this, id] { NodeRegister(id); });
  At(p, 0.1, [this, id] { Destage(id); });
}

void Sim::Fault() {
  if (!load_) return;
  At(-1, U(0.5, 2.0), [this] { Fault(); });
  const int kind = I(0, 4);
  const uint32_t id = static_cast<uint32_t>(I(1, kCacheNodes));
  const double hold = U(0.3, 3.5);
  switch (kind) {
    case 0:
      Crash(id);
      At(-1, hold, [this, id] { Restart(id); });
      return;
    case 1: {  // SIGSTOP a cache node
      const int p = Cn(id);
      if (down_[p] || paused_[p]) return;
      Log("FAULT pause cn", id, " for ", hold);
      paused_[p] = true;
      At(-1, hold, [this, p] { Continue(p); });
      return;
    }
    case 2: {  // the coordinator cut from one cache node, which is cut from etcd too
      const int lead = leader_ >= 0 ? leader_ : 0;
      const std::pair<int, int> a{std::min(Gw(lead), Cn(id)), std::max(Gw(lead), Cn(id))};
      const std::pair<int, int> b{Cn(id), kEtcd};
      Log("FAULT partition gw", lead, " and etcd from cn", id, " for ", hold);
      cut_.insert(a);
      cut_.insert(b);
      At(-1, hold, [this, a, b] {
        cut_.erase(a);
        cut_.erase(b);
      });
      return;
    }
    case 3: {  // SIGSTOP the coordinator, at whatever step it is
      if (leader_ < 0) return;
      const int p = Gw(leader_);
      if (paused_[p]) return;
      Log("FAULT pause coordinator gw", leader_, " for ", hold);
      paused_[p] = true;
      At(-1, hold, [this, p] { Continue(p); });
      return;
    }
    default:
      Log("FAULT slow network");
      slow_until_ = now_ + hold;
      return;
  }
}

void Sim::Continue(int p) {
  paused_[p] = false;
  // What waited for it runs now, in the order it came.
  while (!held_[p].empty()) {
    q_.push({now_, ++seq_, held_[p].front()});
    held_[p].pop_front();
  }
}

void Sim::Heal() {
  Log("heal");
  load_ = false;
  cut_.clear();
  slow_until_ = 0;
  for (int p = 0; p < kProcs; ++p) Continue(p);
  for (uint32_t id = 1; id <= kCacheNodes; ++id) Restart(id);
}

void Sim::FinalCheck() {
  for (int g = 0; g < kGateways; ++g) {
    if (gw_[g].outstanding != 0) {
      Fail(absl::StrCat("gw", g, " still has ", gw_[g].outstanding,
                        " writes unanswered after the cluster settled"));
      return;
    }
  }
  for (int obj = 0; obj < o_.objects; ++obj) {
    const uint32_t owner = Route(published_, obj);
    if (owner == 0) {
      Fail(absl::StrCat("object ", obj, " still held after the cluster settled"));
      return;
    }
    const CacheNode& n = Node(owner);
    uint64_t got = home_.contains(obj) ? home_[obj].v : 0;
    if (n.dirty.contains(obj)) {
      got = n.dirty.at(obj).v;
    } else if (n.clean.contains(obj)) {
      got = n.clean.at(obj);
    }
    if (got < acked_[obj]) {
      Fail(absl::StrCat("object ", obj, " reads version ", got, " from cn", owner,
                        ", older than the acknowledged ", acked_[obj]));
      return;
    }
  }
}

SimResult Sim::Run() {
  issued_.assign(o_.objects, 0);
  acked_.assign(o_.objects, 0);
  busy_.assign(o_.objects, false);
  for (uint32_t id = 1; id <= kCacheNodes; ++id) {
    Node(id).id = id;
    if (P(0.3)) Node(id).clock_skew = U(0.0, 0.6);
    At(Cn(id), 0, [this, id] { NodeRegister(id); });
    At(Cn(id), 0.1, [this, id] { Destage(id); });
  }
  published_.epoch = 1;
  for (int g = 0; g < kGateways; ++g) {
    gw_[g].view = published_;
    At(Gw(g), 0.01 * g, [this, g] { Campaign(g); });
    // Followers take the published ring (the watch), a little late.
    auto follow = std::make_shared<std::function<void()>>();
    *follow = [this, g, follow] {
      At(Gw(g), U(0.05, 0.2), *follow);
      if (gw_[g].term != 0) return;
      Call<CacheRingState>(
          Gw(g), kEtcd, [this](std::function<void(CacheRingState)> r) { r(published_); },
          [this, g](CacheRingState st) {
            if (gw_[g].term == 0 && st.epoch > gw_[g].view.epoch) gw_[g].view = st;
          },
          CacheRingState{});
    };
    At(Gw(g), 0.05, *follow);
  }
  At(-1, 0.5, [this] { Client(); });
  At(-1, 1.0, [this] { Fault(); });
  At(-1, o_.fault_seconds, [this] { Heal(); });
  const double end = o_.fault_seconds + o_.settle_seconds;
  while (!q_.empty() && res_.ok) {
    const Event e = q_.top();
    q_.pop();
    if (e.t > end) break;
    now_ = e.t;
    const Timer& timer = timers_[e.timer];
    if (timer.proc >= 0) {
      if (down_[timer.proc] || timer.incarnation != incarnation_[timer.proc]) {
        Release(e.timer);
        continue;
      }
      if (paused_[timer.proc]) {
        held_[timer.proc].push_back(e.timer);
        continue;
      }
    }
    // Out of timers_ before it runs: what it schedules may reuse the slot or grow the vector.
    const Fn fn = std::move(timers_[e.timer].fn);
    Release(e.timer);
    fn();
    ++res_.events;
    Check();
  }
  if (res_.ok) FinalCheck();
  return res_;
}


}  // namespace internal

SimResult RunControlSim(const SimOptions& options) { return internal::Sim(options).Run(); }

}  // namespace ringcache::coordinator::sim
