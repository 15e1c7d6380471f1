// The simulated cluster of the control plane simulation (control_sim.h): its daemons' models and
// the event loop. Internal to coordinator/sim: control_sim.cc holds the event loop, the data
// path and the faults; sim_coordinator.cc the leases, the election and the coordinator that
// runs the real RingChange.
//
// Thread-safety: one simulation per object; not thread-safe.
#ifndef RINGCACHE_COORDINATOR_SIM_SIM_CLUSTER_H_
#define RINGCACHE_COORDINATOR_SIM_SIM_CLUSTER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/ring_change.h"
#include "coordinator/sim/control_sim.h"

namespace ringcache::coordinator::sim::internal {

constexpr int kGateways = 2;
constexpr int kCacheNodes = 3;  // ids 1..3
constexpr int kDataNodes = 3;
constexpr double kTtl = 1.5;        // cache node leases and the election lease, seconds
constexpr double kKeepalive = 0.3;  // keepalive and campaign period
constexpr double kCallTimeout = 1.0;

// Processes: gateways 0..1, cache nodes 2..4 (ids 1..3), data nodes 5..7, etcd 8.
constexpr int kProcs = 9;
constexpr int kEtcd = 8;
inline int Gw(int i) { return i; }
inline int Cn(uint32_t id) { return 1 + static_cast<int>(id); }
inline int Dn(int j) { return 5 + j; }

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
  explicit Sim(const SimOptions& o)
      : o_(o), rng_(o.seed * 0x9e3779b97f4a7c15ULL + 7), op_rng_(o.seed * 31 + 1) {}
  SimResult Run();

 private:
  using Fn = std::function<void()>;
  // What an event does, kept in timers_ while it waits: the queue orders small entries that
  // name their timer (a heap of whole timers spent its time moving their functions).
  struct Timer {
    int proc = -1;  // -1: the world (faults, clients)
    uint64_t incarnation = 0;
    Fn fn;
  };
  struct Event {
    double t;
    uint64_t seq;
    uint32_t timer;  // index into timers_
    bool operator>(const Event& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
  };

  double U(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
  int I(int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng_); }

  bool P(double p) { return U(0, 1) < p; }

  // A trace line, built only when tracing (most runs do not: the pieces are not joined).
  template <typename... Parts>
  void Log(const Parts&... parts) {
    if (o_.trace) res_.trace.push_back(absl::StrCat(now_, " ", parts...));
  }
  void Fail(const std::string& s) {
    if (!res_.ok) return;
    res_.ok = false;
    res_.violation = absl::StrCat("t=", now_, "s: ", s);
    Log("VIOLATION ", s);
  }

  // A timer of process `proc`: dropped if it crashed meanwhile, held while it is paused.
  void At(int proc, double delay, Fn fn) {
    Schedule(now_ + delay, proc, proc < 0 ? 0 : incarnation_[proc], std::move(fn));
  }
  void Schedule(double t, int proc, uint64_t incarnation, Fn fn) {
    uint32_t timer;
    if (free_timers_.empty()) {
      timer = static_cast<uint32_t>(timers_.size());
      timers_.push_back({proc, incarnation, std::move(fn)});
    } else {
      timer = free_timers_.back();
      free_timers_.pop_back();
      timers_[timer] = {proc, incarnation, std::move(fn)};
    }
    q_.push({t, ++seq_, timer});
  }
  void Release(uint32_t timer) {
    timers_[timer].fn = nullptr;
    free_timers_.push_back(timer);
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
    Schedule(now_ + Delay(), to, incarnation_[to], std::move(fn));
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
  struct Member {
    uint32_t id = 0;
    double weight = 1;
  };
  // The ring of `s`: the members not removed (and `plus`), each with its weight (a reweight's,
  // and with `reweighted` the one under way).
  static std::vector<Member> Members(const CacheRingState& s, uint32_t plus = 0,
                                     bool reweighted = false) {
    std::vector<Member> m;
    for (uint32_t id = 1; id <= kCacheNodes; ++id) {
      if (id != plus && std::find(s.removed.begin(), s.removed.end(), id) != s.removed.end()) {
        continue;
      }
      double w = 1;
      for (const auto& x : s.weights) w = x.id == id ? x.weight : w;
      if (reweighted && s.reweighting.id == id) w = s.reweighting.weight;
      m.push_back({id, w});
    }
    return m;
  }
  // Weighted rendezvous hashing: the member with the highest -weight / ln(u) wins, u uniform in
  // (0, 1) from the hash of (object, member). Like the real ring, a weight change of one member
  // moves objects only to or from it.
  static uint32_t Owner(int obj, const std::vector<Member>& members) {
    uint32_t best = 0;
    double top = 0;
    for (const Member& m : members) {
      const uint64_t h = Mix(static_cast<uint64_t>(obj) * 1000003 + m.id);
      const double u = (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;  // 2^53
      const double score = -m.weight / std::log(u);
      if (best == 0 || score > top) best = m.id, top = score;
    }
    return best;
  }
  // The owner a gateway routes `obj` to, or 0 while its requests are held.
  uint32_t Route(const CacheRingState& s, int obj) const {
    const uint32_t o = Owner(obj, Members(s));
    if (std::find(s.removing.begin(), s.removing.end(), o) != s.removing.end()) return 0;
    if (s.joining != 0 && Owner(obj, Members(s, s.joining)) == s.joining) return 0;
    if (s.reweighting.id != 0 && !o_.no_reweight_hold &&
        Owner(obj, Members(s, 0, true)) != o) {
      return 0;
    }
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
  // An operator resizes a cache node's SSD now and then: the coordinator gives it a new ring
  // weight (a reweight, handed over like a join). True if one began.
  bool MaybeReweight(int g);
  void Step(int g);
  void Settle(int g, const coordinator::Step& step, Reply done);
  void Handoff(int g, Reply done);
  void FlushOn(uint32_t id, uint64_t epoch, const std::vector<Member>* moving_under,
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
  // The operator's reweights (an SSD resize) come from a stream of their own, so that the rest
  // of a seed's schedule is the one it had before they were modelled.
  std::mt19937_64 op_rng_;
  SimResult res_;
  double now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> q_;
  std::vector<Timer> timers_;
  std::vector<uint32_t> free_timers_;
  uint64_t incarnation_[kProcs] = {};
  bool down_[kProcs] = {};
  bool paused_[kProcs] = {};
  std::deque<uint32_t> held_[kProcs];  // timers of a paused process, in the order they came
  std::set<std::pair<int, int>> cut_;
  double slow_until_ = 0;
  bool load_ = true;

  CacheNode cn_[kCacheNodes];
  DataNode dn_[kDataNodes];
  std::map<int, Version> home_;
  // Set where what Check() looks at changes (an acknowledgement, a log record, a home copy):
  // between two such changes its answer cannot change, so it is not asked again.
  bool durability_changed_ = true;
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


}  // namespace ringcache::coordinator::sim::internal

#endif  // RINGCACHE_COORDINATOR_SIM_SIM_CLUSTER_H_
