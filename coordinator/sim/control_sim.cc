// The control plane simulation (control_sim.h). One event queue in simulated time; every daemon
// is a small model that reacts to messages and timers; the coordinator runs the real RingChange.
#include "coordinator/sim/control_sim.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "coordinator/ring_change.h"

namespace ringcache::coordinator::sim {
namespace {

constexpr int kGateways = 2;
constexpr int kCacheNodes = 3;  // ids 1..3
constexpr int kDataNodes = 3;
constexpr double kTtl = 1.5;        // cache node leases and the election lease, seconds
constexpr double kKeepalive = 0.3;  // keepalive and campaign period
constexpr double kCallTimeout = 1.0;

// Processes: gateways 0..1, cache nodes 2..4 (ids 1..3), data nodes 5..7, etcd 8.
constexpr int kProcs = 9;
constexpr int kEtcd = 8;
int Gw(int i) { return i; }
int Cn(uint32_t id) { return 1 + static_cast<int>(id); }
int Dn(int j) { return 5 + j; }

struct Version {  // a block version as the data nodes order it: (epoch, seq, writer)
  uint64_t epoch = 0, seq = 0;
  uint32_t writer = 0;
  uint64_t v = 0;  // the client's version number
  auto key() const { return std::make_tuple(epoch, seq, writer); }
};

struct Rec {
  int obj = 0;
  uint64_t v = 0, epoch = 0, seq = 0;
};

struct CacheNode {
  uint32_t id = 0;
  // Persisted (SSD and state files): survive a crash.
  uint64_t epoch = 0, term = 0;
  bool quarantined = false;
  bool held_lease = false;
  uint64_t next_seq = 1;
  std::map<int, Version> dirty;
  std::map<int, uint64_t> clean;
  // How much slower than etcd's its clock runs (a VM that was descheduled, a drifting clock):
  // its own view of its lease then outlasts the lease, which only the log seal covers.
  double clock_skew = 0;
  // RAM.
  double lease_until = -1;
  int64_t lease = 0;
  std::map<uint64_t, int> running;  // writes in flight by request epoch
};

struct DataNode {
  std::map<std::pair<uint32_t, uint64_t>, Rec> log;  // (cache node, seq)
  std::map<uint32_t, uint64_t> seal;
  uint64_t term = 0;
};

struct Lease {
  int64_t id = 0;
  double expiry = 0;
};

struct Gateway {
  CacheRingState view;         // the ring it routes on (and, leading, its router state)
  uint64_t term = 0;           // the term it believes it leads (0: follower)
  uint64_t control_term = 0;   // carried by its control steps; only grows
  std::optional<RingChange> change;
  uint64_t change_term = 0;
  std::map<uint32_t, int64_t> accepted;  // the lease each ring member was accepted under
  std::map<uint32_t, std::pair<int64_t, bool>> quarantined;  // health at first sight, by lease
  int outstanding = 0;         // client writes it is routing
};

struct Write {
  int obj = 0;
  uint64_t v = 0;
  int gw = 0;
};

class Sim {
 public:
  explicit Sim(const SimOptions& o) : o_(o), rng_(o.seed * 0x9e3779b97f4a7c15ULL + 7) {}
  SimResult Run();

 private:
  using Fn = std::function<void()>;
  struct Event {
    double t;
    uint64_t seq;
    int proc;  // -1: the world (faults, clients)
    uint64_t incarnation;
    Fn fn;
    bool operator>(const Event& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
  };

  double U(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
  int I(int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng_); }
  bool P(double p) { return U(0, 1) < p; }

  void Log(const std::string& s) {
    if (o_.trace) res_.trace.push_back(absl::StrCat(now_, " ", s));
  }
  void Fail(const std::string& s) {
    if (!res_.ok) return;
    res_.ok = false;
    res_.violation = absl::StrCat("t=", now_, "s: ", s);
    Log("VIOLATION " + s);
  }

  // A timer of process `proc`: dropped if it crashed meanwhile, held while it is paused.
  void At(int proc, double delay, Fn fn) {
    q_.push({now_ + delay, ++seq_, proc, proc < 0 ? 0 : incarnation_[proc], std::move(fn)});
  }
  double Delay() {
    const double spike = slow_until_ > now_ ? U(0.05, 0.4) : 0;
    return P(0.1) ? U(0.02, 0.3) + spike : U(0.0005, 0.01) + spike;
  }
  bool Cut(int a, int b) const {
    return cut_.contains({std::min(a, b), std::max(a, b)});
  }
  // Sends `fn` to run at `to` after a network delay; lost if the link is cut or `to` is down.
  void Send(int from, int to, Fn fn) {
    if (Cut(from, to)) return;
    q_.push({now_ + Delay(), ++seq_, to, incarnation_[to], std::move(fn)});
  }
  // A call: `handle(reply)` runs at `to` and calls `reply(r)` once, now or later; `done(r)` then
  // runs at `from` — or `done(timeout error)` if no reply came within `timeout`.
  template <typename R>
  void Call(int from, int to, std::function<void(std::function<void(R)>)> handle,
            std::function<void(R)> done, R timed_out, double timeout = kCallTimeout) {
    auto fired = std::make_shared<bool>(false);
    Send(from, to, [this, from, to, handle, done, fired] {
      handle([this, from, to, done, fired](R r) {
        Send(to, from, [done, fired, r] {
          if (*fired) return;
          *fired = true;
          done(r);
        });
      });
    });
    At(from, timeout, [done, fired, timed_out] {
      if (*fired) return;
      *fired = true;
      done(timed_out);
    });
  }
  using Reply = std::function<void(absl::Status)>;
  void StatusCall(int from, int to, std::function<void(Reply)> handle,
                  std::function<void(absl::Status)> done, double timeout = kCallTimeout) {
    Call<absl::Status>(from, to, std::move(handle), std::move(done),
                       absl::DeadlineExceededError("no answer"), timeout);
  }

  // Ring.
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
  }
  static std::vector<uint32_t> Members(const CacheRingState& s, uint32_t plus = 0) {
    std::vector<uint32_t> m;
    for (uint32_t id = 1; id <= kCacheNodes; ++id) {
      if (id == plus || std::find(s.removed.begin(), s.removed.end(), id) == s.removed.end()) {
        m.push_back(id);
      }
    }
    return m;
  }
  static uint32_t Owner(int obj, const std::vector<uint32_t>& members) {
    uint32_t best = 0;
    uint64_t top = 0;
    for (uint32_t id : members) {
      const uint64_t h = Mix(static_cast<uint64_t>(obj) * 1000003 + id);
      if (best == 0 || h > top) best = id, top = h;
    }
    return best;
  }
  // The owner a gateway routes `obj` to, or 0 while its requests are held.
  static uint32_t Route(const CacheRingState& s, int obj) {
    const uint32_t o = Owner(obj, Members(s));
    if (std::find(s.removing.begin(), s.removing.end(), o) != s.removing.end()) return 0;
    if (s.joining != 0 && Owner(obj, Members(s, s.joining)) == s.joining) return 0;
    return o;
  }

  bool Owns(const CacheNode& n) const { return !n.quarantined && now_ < n.lease_until; }
  CacheNode& Node(uint32_t id) { return cn_[id - 1]; }

  void Check();
  void Client();
  void GwWrite(const Write& w, int attempt);
  void CnWrite(uint32_t id, Write w, uint64_t req_epoch, Reply reply);
  void Destage(uint32_t id);
  void ApplyHome(uint32_t writer, const Version& v, int obj);
  void Reclaim(uint32_t writer, uint64_t seq, int obj, uint64_t term);
  void NodeKeepalive(uint32_t id);
  void NodeRegister(uint32_t id);
  void Campaign(int g);
  void TakeOver(int g, uint64_t term);
  void Decide(int g);
  void Step(int g);
  void Settle(int g, const coordinator::Step& step, Reply done);
  void Handoff(int g, Reply done);
  void FlushOn(uint32_t id, uint64_t epoch, const std::vector<uint32_t>* moving_under,
               Reply reply);
  absl::Status CheckTerm(uint64_t* held, uint64_t term);
  void Fault();
  void Heal();
  void Continue(int p);
  void Crash(uint32_t id);
  void Restart(uint32_t id);
  void FinalCheck();

  SimOptions o_;
  std::mt19937_64 rng_;
  SimResult res_;
  double now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> q_;
  uint64_t incarnation_[kProcs] = {};
  bool down_[kProcs] = {};
  bool paused_[kProcs] = {};
  std::deque<Event> held_[kProcs];
  std::set<std::pair<int, int>> cut_;
  double slow_until_ = 0;
  bool load_ = true;

  CacheNode cn_[kCacheNodes];
  DataNode dn_[kDataNodes];
  std::map<int, Version> home_;
  Gateway gw_[kGateways];
  // etcd
  int64_t revision_ = 1;
  int leader_ = -1;
  uint64_t term_ = 0;
  double leader_expiry_ = 0;
  std::map<uint32_t, Lease> leases_;
  CacheRingState published_;
  // clients
  std::vector<uint64_t> issued_, acked_;
  std::vector<bool> busy_;
  std::map<std::pair<int, uint64_t>, uint32_t> owner_at_;  // (obj, epoch) -> node that took it
};

absl::Status Sim::CheckTerm(uint64_t* held, uint64_t term) {
  if (term != 0 && term < *held && !o_.no_term_fence) {
    ++res_.steps_refused;
    return TypedError(ErrorKind::kStaleTerm, absl::StrCat("stale coordinator term ", term));
  }
  *held = std::max(*held, term);
  return absl::OkStatus();
}

void Sim::Check() {
  for (size_t obj = 0; obj < acked_.size(); ++obj) {
    const uint64_t a = acked_[obj];
    if (a == 0) continue;
    bool durable = home_.contains(static_cast<int>(obj)) && home_[static_cast<int>(obj)].v >= a;
    for (int j = 0; j < kDataNodes && !durable; ++j) {
      for (const auto& [key, r] : dn_[j].log) {
        if (r.obj == static_cast<int>(obj) && r.v >= a) {
          durable = true;
          break;
        }
      }
    }
    if (!durable) {
      Fail(absl::StrCat("object ", obj, ": acknowledged version ", a,
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
          Log(absl::StrCat("gw", w.gw, " ack obj ", w.obj, " v", w.v, " via cn", owner));
          acked_[w.obj] = std::max(acked_[w.obj], w.v);
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
          Log(absl::StrCat("cn", id, " took obj ", w.obj, " v", w.v, " epoch ", ver.epoch,
                           " seq ", ver.seq));
          if (superseded != 0) Reclaim(id, superseded, w.obj, 0);
          reply(absl::OkStatus());
        });
  }
}

void Sim::ApplyHome(uint32_t writer, const Version& v, int obj) {
  (void)writer;
  Version& h = home_[obj];
  if (v.key() > h.key()) h = v;
}

// Drops log record `seq` of `writer` (for `obj`: its two log holders) on the data nodes.
void Sim::Reclaim(uint32_t writer, uint64_t seq, int obj, uint64_t term) {
  for (int k = 0; k < 2; ++k) {
    const int j = (obj + k) % kDataNodes;
    Send(Cn(writer), Dn(j), [this, j, writer, seq, term] {
      DataNode& d = dn_[j];
      if (!CheckTerm(&d.term, term).ok()) return;
      d.log.erase({writer, seq});
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

// ---- leases and the election ----

void Sim::NodeRegister(uint32_t id) {
  const double sent = now_;
  Call<int64_t>(
      Cn(id), kEtcd,
      [this, id](std::function<void(int64_t)> r) {
        const int64_t lease = ++revision_;
        leases_[id] = {lease, now_ + kTtl};
        r(lease);
      },
      [this, id, sent](int64_t lease) {
        CacheNode& n = Node(id);
        if (lease == 0) {
          At(Cn(id), kKeepalive, [this, id] { NodeRegister(id); });
          return;
        }
        n.lease = lease;
        n.held_lease = true;
        n.lease_until = sent + kTtl * (1 + n.clock_skew);
        Log(absl::StrCat("cn", id, " registered, lease ", lease));
        At(Cn(id), kKeepalive, [this, id] { NodeKeepalive(id); });
      },
      0);
}

void Sim::NodeKeepalive(uint32_t id) {
  const double sent = now_;
  const int64_t lease = Node(id).lease;
  Call<int>(
      Cn(id), kEtcd,
      [this, id, lease](std::function<void(int)> r) {
        auto it = leases_.find(id);
        if (it == leases_.end() || it->second.id != lease || it->second.expiry <= now_) {
          if (it != leases_.end() && it->second.id == lease) leases_.erase(it);
          return r(-1);
        }
        it->second.expiry = now_ + kTtl;
        r(1);
      },
      [this, id, sent](int ok) {
        CacheNode& n = Node(id);
        if (ok == 1) {
          // Conservative (from the send), by the node's own clock, which may run slow.
          n.lease_until = std::max(n.lease_until, sent + kTtl * (1 + n.clock_skew));
          At(Cn(id), kKeepalive, [this, id] { NodeKeepalive(id); });
        } else if (ok == -1) {
          // The lease is gone: the objects may have been given away. Quarantined until the
          // coordinator settles and re-admits the node; registered again.
          Log(absl::StrCat("cn", id, " lost its lease: quarantined"));
          n.quarantined = true;
          n.lease_until = -1;
          NodeRegister(id);
        } else {
          At(Cn(id), kKeepalive, [this, id] { NodeKeepalive(id); });
        }
      },
      0);
}

void Sim::Campaign(int g) {
  At(Gw(g), kKeepalive, [this, g] { Campaign(g); });
  const uint64_t mine = gw_[g].term;
  Call<uint64_t>(
      Gw(g), kEtcd,
      [this, g, mine](std::function<void(uint64_t)> r) {
        if (leader_ == g && term_ == mine && mine != 0 && leader_expiry_ > now_) {
          leader_expiry_ = now_ + kTtl;
          return r(mine);
        }
        if (leader_ >= 0 && leader_expiry_ > now_) return r(0);  // another leads
        leader_ = g;
        term_ = static_cast<uint64_t>(++revision_);
        leader_expiry_ = now_ + kTtl;
        r(term_);
      },
      [this, g, mine](uint64_t term) {
        Gateway& gw = gw_[g];
        if (term == mine && mine != 0) return;  // still leading
        if (term == 0) {
          if (gw.term != 0) Log(absl::StrCat("gw", g, " lost term ", gw.term));
          gw.term = 0;  // the publisher is gone: a change under way stops at its next step
          return;
        }
        if (term != 0 && term != mine && mine != 0) Log(absl::StrCat("gw", g, " re-elected"));
        TakeOver(g, term);
      },
      0, kKeepalive);
}

void Sim::TakeOver(int g, uint64_t term) {
  Gateway& gw = gw_[g];
  gw.term = term;
  gw.control_term = std::max(gw.control_term, term);
  gw.change.reset();
  gw.accepted.clear();
  gw.quarantined.clear();
  ++res_.term_changes;
  Log(absl::StrCat("gw", g, " leads, term ", term));
  // From the published ring: a change the previous leader left under way is decided again.
  Call<int>(
      Gw(g), kEtcd,
      [this, g, term](std::function<void(int)> r) {
        if (leader_ != g || term_ != term) return r(0);
        CacheRingState st = published_;
        st.removing.clear();
        st.joining = 0;
        st.epoch = std::max(st.epoch, gw_[g].view.epoch) + 1;
        published_ = st;
        r(1);
        gw_[g].view = st;  // the coordinator's router takes what it published
      },
      [this, g, term](int ok) {
        if (ok == 1 && gw_[g].term == term) At(Gw(g), 0, [this, g] { Decide(g); });
      },
      0);
}

// ---- the coordinator ----

void Sim::Decide(int g) {
  Gateway& gw = gw_[g];
  if (gw.term == 0) return;
  At(Gw(g), 0.2, [this, g] { Decide(g); });
  if (gw.change.has_value()) return;
  const uint64_t term = gw.term;
  Call<std::map<uint32_t, int64_t>>(
      Gw(g), kEtcd,
      [this](std::function<void(std::map<uint32_t, int64_t>)> r) {
        std::map<uint32_t, int64_t> live;
        for (auto& [id, l] : leases_) {
          if (l.expiry > now_) live[id] = l.id;
        }
        r(live);
      },
      [this, g, term](std::map<uint32_t, int64_t> live) {
        Gateway& gw = gw_[g];
        if (gw.term != term || gw.change.has_value()) return;
        for (uint32_t id = 1; id <= kCacheNodes; ++id) {
          const bool in_ring = std::find(gw.view.removed.begin(), gw.view.removed.end(), id) ==
                               gw.view.removed.end();
          const int64_t lease = live.contains(id) ? live[id] : 0;
          RingChange::Kind kind;
          if (in_ring && lease != 0 && gw.accepted.contains(id) && gw.accepted[id] == lease) {
            continue;
          }
          if (in_ring && lease != 0 && !gw.accepted.contains(id)) {
            // First sight: the member it routes to, unless it says it is quarantined (it lost
            // its objects while no coordinator watched); then it leaves and rejoins.
            auto q = gw.quarantined.find(id);
            if (q == gw.quarantined.end() || q->second.first != lease) {
              Call<int>(
                  Gw(g), Cn(id), [this, id](std::function<void(int)> r) {
                    r(Node(id).quarantined ? 1 : 2);
                  },
                  [this, g, id, lease](int h) {
                    if (h != 0) gw_[g].quarantined[id] = {lease, h == 1};
                  },
                  0);
              continue;
            }
            if (!q->second.second) {
              gw.accepted[id] = lease;
              continue;
            }
          }
          if (!in_ring && lease == 0) continue;
          kind = in_ring ? RingChange::Kind::kRemoval : RingChange::Kind::kJoin;
          auto c = RingChange::Begin(kind, gw.view, {1, 2, 3}, id, 5, absl::Milliseconds(300));
          if (!c.ok()) continue;
          Log(absl::StrCat("gw", g, " begins ", in_ring ? "removal" : "join", " of cn", id,
                           " (term ", term, ")"));
          gw.change.emplace(std::move(*c));
          gw.change_term = term;
          if (!in_ring) gw.accepted[id] = lease;
          At(Gw(g), 0, [this, g] { Step(g); });
          return;
        }
      },
      {});
}

void Sim::Step(int g) {
  Gateway& gw = gw_[g];
  if (!gw.change.has_value()) return;
  RingChange& c = *gw.change;
  const coordinator::Step step = c.next();
  const uint64_t term = gw.change_term;
  auto report = [this, g, term](absl::Status s) {
    Gateway& gw = gw_[g];
    if (!gw.change.has_value() || gw.change_term != term) return;
    gw.change->Report(s, /*term_ended=*/gw.term != term);
    At(Gw(g), 0, [this, g] { Step(g); });
  };
  auto publish = [this, g, term](CacheRingState st, Reply r) {
    StatusCall(
        Gw(g), kEtcd,
        [this, g, term, st](Reply reply) {
          if (leader_ != g || term_ != term) return reply(absl::FailedPreconditionError("term"));
          published_ = st;
          reply(absl::OkStatus());
        },
        [this, g, st, r](absl::Status s) {
          if (s.ok()) gw_[g].view = st;
          r(s);
        });
  };
  switch (step.kind) {
    case coordinator::Step::kPublish:
      publish(step.state, report);
      return;
    case coordinator::Step::kDrain:
      At(Gw(g), 0.2, [report] { report(absl::OkStatus()); });
      return;
    case coordinator::Step::kSettle:
      Settle(g, step, report);
      return;
    case coordinator::Step::kHandoff:
      Handoff(g, report);
      return;
    case coordinator::Step::kPause:
      At(Gw(g), absl::ToDoubleSeconds(step.wait), [report] { report(absl::OkStatus()); });
      return;
    case coordinator::Step::kPublishOutcome: {
      if (gw.term != term) return report(absl::FailedPreconditionError("term ended"));
      const CacheRingState out = c.Outcome(gw.view);
      publish(out, report);
      return;
    }
    case coordinator::Step::kDone:
      Log(absl::StrCat("gw", g, " change of cn", c.node(), " done: ", c.status().ToString()));
      if (c.status().ok()) ++res_.changes_done;
      gw.change.reset();
      return;
  }
}

void Sim::FlushOn(uint32_t id, uint64_t epoch, const std::vector<uint32_t>* moving_under,
                  Reply reply) {
  CacheNode& n = Node(id);
  n.epoch = std::max(n.epoch, epoch);
  // Waits for the writes admitted under an older epoch (RequestGate::Advance).
  if (!n.running.empty() && n.running.begin()->first < epoch) {
    std::vector<uint32_t> m = moving_under ? *moving_under : std::vector<uint32_t>{};
    const bool moving = moving_under != nullptr;
    At(Cn(id), 0.01, [this, id, epoch, m, moving, reply] {
      FlushOn(id, epoch, moving ? &m : nullptr, reply);
    });
    return;
  }
  for (auto it = n.dirty.begin(); it != n.dirty.end();) {
    const int obj = it->first;
    if (moving_under != nullptr && Owner(obj, *moving_under) == id) {
      ++it;
      continue;
    }
    ApplyHome(id, it->second, obj);  // the destage's home writes (modelled as one step)
    Reclaim(id, it->second.seq, obj, 0);
    n.clean[obj] = it->second.v;
    it = n.dirty.erase(it);
  }
  if (moving_under != nullptr) {  // drop the clean copies of what moves (DropBlocks)
    for (auto it = n.clean.begin(); it != n.clean.end();) {
      it = Owner(it->first, *moving_under) == id ? std::next(it) : n.clean.erase(it);
    }
  }
  reply(absl::OkStatus());
}

void Sim::Settle(int g, const coordinator::Step& step, Reply done) {
  const uint32_t id = gw_[g].change->node();
  const uint64_t epoch = step.state.epoch;
  const uint64_t term = gw_[g].control_term;
  // Alive: destage (Flush with the epoch). Dead: seal the log everywhere, scan, write home.
  StatusCall(
      Gw(g), Cn(id), [](Reply r) { r(absl::OkStatus()); },
      [this, g, id, epoch, term, done](absl::Status probe) {
        if (probe.ok()) {
          StatusCall(
              Gw(g), Cn(id),
              [this, id, epoch](Reply r) { FlushOn(id, epoch, nullptr, r); }, done, 5.0);
          return;
        }
        auto pending = std::make_shared<int>(kDataNodes);
        auto failed = std::make_shared<absl::Status>();
        auto records = std::make_shared<std::vector<Rec>>();
        auto scan = [this, g, id, term, done, pending, failed, records] {
          // Newest record per object, home conditionally; then drop what was scanned.
          std::map<int, Version> newest;
          uint64_t top = 0;
          for (const Rec& r : *records) {
            Version v{r.epoch, r.seq, id, r.v};
            if (!newest.contains(r.obj) || v.key() > newest[r.obj].key()) newest[r.obj] = v;
            top = std::max(top, r.seq);
          }
          StatusCall(
              Gw(g), Dn(0),
              [this, id, newest](Reply r) {
                for (const auto& [obj, v] : newest) ApplyHome(id, v, obj);
                r(absl::OkStatus());
              },
              [this, g, id, term, top, done](absl::Status s) {
                if (!s.ok()) return done(s);
                for (int j = 0; j < kDataNodes; ++j) {
                  Send(Gw(g), Dn(j), [this, j, id, term, top] {
                    DataNode& d = dn_[j];
                    if (!CheckTerm(&d.term, term).ok()) return;
                    for (auto it = d.log.begin(); it != d.log.end();) {
                      it = it->first.first == id && it->first.second <= top ? d.log.erase(it)
                                                                           : std::next(it);
                    }
                  });
                }
                done(absl::OkStatus());
              });
        };
        for (int j = 0; j < kDataNodes; ++j) {
          Call<std::pair<absl::Status, std::vector<Rec>>>(
              Gw(g), Dn(j),
              [this, j, id, epoch, term](
                  std::function<void(std::pair<absl::Status, std::vector<Rec>>)> r) {
                DataNode& d = dn_[j];
                absl::Status t = CheckTerm(&d.term, term);
                if (!t.ok()) return r({t, {}});
                if (!o_.no_log_seal) d.seal[id] = std::max(d.seal[id], epoch);
                std::vector<Rec> out;
                for (const auto& [key, rec] : d.log) {
                  if (key.first == id) out.push_back(rec);
                }
                r({absl::OkStatus(), out});
              },
              [pending, failed, records, scan, done](
                  std::pair<absl::Status, std::vector<Rec>> got) {
                if (!got.first.ok()) *failed = got.first;
                records->insert(records->end(), got.second.begin(), got.second.end());
                if (--*pending > 0) return;
                if (!failed->ok()) return done(*failed);
                scan();
              },
              {absl::DeadlineExceededError("no answer"), {}});
        }
      },
      0.3);
}

void Sim::Handoff(int g, Reply done) {
  Gateway& gw = gw_[g];
  const uint32_t joiner = gw.change->node();
  const CacheRingState st = gw.view;
  const std::vector<uint32_t> next = Members(st, joiner);
  const uint64_t epoch = st.epoch;
  const uint64_t term = gw.control_term;
  std::vector<uint32_t> members = Members(st);
  // One member after the other, then the joiner (Router::Handoff).
  auto chain = std::make_shared<std::function<void(size_t)>>();
  *chain = [this, g, members, next, epoch, term, joiner, done, chain](size_t i) {
    if (i == members.size()) {
      StatusCall(
          Gw(g), Cn(joiner),
          [this, joiner, epoch, term](Reply r) {
            CacheNode& n = Node(joiner);
            if (absl::Status t = CheckTerm(&n.term, term); !t.ok()) return r(t);
            n.dirty.clear();  // DropBlocks(all): its dirty blocks were settled when it left
            n.clean.clear();
            n.quarantined = false;
            n.epoch = std::max(n.epoch, epoch);
            r(absl::OkStatus());
          },
          done);
      return;
    }
    const uint32_t m = members[i];
    StatusCall(
        Gw(g), Cn(m),
        [this, m, epoch, term, next](Reply r) {
          if (absl::Status t = CheckTerm(&Node(m).term, term); !t.ok()) return r(t);
          FlushOn(m, epoch, &next, r);
        },
        [chain, i, done](absl::Status s) {
          if (!s.ok()) return done(s);
          (*chain)(i + 1);
        },
        5.0);
  };
  (*chain)(0);
}

// ---- faults ----

void Sim::Crash(uint32_t id) {
  const int p = Cn(id);
  if (down_[p]) return;
  Log(absl::StrCat("FAULT crash cn", id));
  down_[p] = true;
  paused_[p] = false;
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
  Log(absl::StrCat("restart cn", id));
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
      Log(absl::StrCat("FAULT pause cn", id, " for ", hold));
      paused_[p] = true;
      At(-1, hold, [this, p] { Continue(p); });
      return;
    }
    case 2: {  // the coordinator cut from one cache node, which is cut from etcd too
      const int lead = leader_ >= 0 ? leader_ : 0;
      const std::pair<int, int> a{std::min(Gw(lead), Cn(id)), std::max(Gw(lead), Cn(id))};
      const std::pair<int, int> b{Cn(id), kEtcd};
      Log(absl::StrCat("FAULT partition gw", lead, " and etcd from cn", id, " for ", hold));
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
      Log(absl::StrCat("FAULT pause coordinator gw", leader_, " for ", hold));
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
    Event h = std::move(held_[p].front());
    held_[p].pop_front();
    h.t = now_;
    h.seq = ++seq_;
    q_.push(std::move(h));
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
    Event e = q_.top();
    q_.pop();
    if (e.t > end) break;
    now_ = e.t;
    if (e.proc >= 0) {
      if (down_[e.proc] || e.incarnation != incarnation_[e.proc]) continue;
      if (paused_[e.proc]) {
        held_[e.proc].push_back(std::move(e));
        continue;
      }
    }
    e.fn();
    ++res_.events;
    Check();
  }
  if (res_.ok) FinalCheck();
  return res_;
}

}  // namespace

SimResult RunControlSim(const SimOptions& options) { return Sim(options).Run(); }

}  // namespace ringcache::coordinator::sim
