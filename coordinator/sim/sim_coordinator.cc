// The control plane simulation (control_sim.h): leases, the election, and the coordinator
// that runs the real RingChange against the simulated cluster (sim_cluster.h).

#include <array>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "coordinator/member_decision.h"
#include "coordinator/sim/sim_cluster.h"

namespace ringcache::coordinator::sim::internal {

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
        Log("cn", id, " registered, lease ", lease);
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
          Log("cn", id, " lost its lease: quarantined");
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
          if (gw.term != 0) Log("gw", g, " lost term ", gw.term);
          gw.term = 0;  // the publisher is gone: a change under way stops at its next step
          return;
        }
        if (term != 0 && term != mine && mine != 0) Log("gw", g, " re-elected");
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
  Log("gw", g, " leads, term ", term);
  // From the published ring: a change the previous leader left under way is decided again.
  Call<int>(
      Gw(g), kEtcd,
      [this, g, term](std::function<void(int)> r) {
        if (leader_ != g || term_ != term) return r(0);
        CacheRingState st = published_;
        st.removing.clear();
        st.joining = 0;
        st.reweighting = {};
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
  if (gw.change.has_value() || MaybeReweight(g)) return;
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
          // The daemon's own decision (coordinator/member_decision.h) on the facts it sees.
          MemberFacts f;
          f.id = id;
          f.in_ring = std::find(gw.view.removed.begin(), gw.view.removed.end(), id) ==
                      gw.view.removed.end();
          f.lease = live.contains(id) ? live[id] : 0;
          if (gw.accepted.contains(id)) f.accepted = gw.accepted[id];
          if (auto q = gw.quarantined.find(id); q != gw.quarantined.end() &&
                                                q->second.first == f.lease) {
            f.quarantined = q->second.second;
          }
          const MemberVerdict v = DecideMember(f);
          const bool in_ring = f.in_ring;
          const int64_t lease = f.lease;
          if (v.kind == MemberVerdict::kAccept) gw.accepted[id] = lease;
          if (v.kind == MemberVerdict::kAskHealth) {
            Call<int>(
                Gw(g), Cn(id), [this, id](std::function<void(int)> r) {
                  r(Node(id).quarantined ? 1 : 2);
                },
                [this, g, id, lease](int h) {
                  if (h != 0) gw_[g].quarantined[id] = {lease, h == 1};
                },
                0);
          }
          if (v.kind != MemberVerdict::kRemove && v.kind != MemberVerdict::kJoin) continue;
          const RingChange::Kind kind =
              in_ring ? RingChange::Kind::kRemoval : RingChange::Kind::kJoin;
          auto c = RingChange::Begin(kind, gw.view, {1, 2, 3}, id, 5, absl::Milliseconds(300));
          if (!c.ok()) continue;
          Log("gw", g, " begins ", in_ring ? "removal" : "join", " of cn", id,
                           " (term ", term, ")");
          gw.change.emplace(std::move(*c));
          gw.change_term = term;
          if (!in_ring) gw.accepted[id] = lease;
          At(Gw(g), 0, [this, g] { Step(g); });
          return;
        }
      },
      {});
}

bool Sim::MaybeReweight(int g) {
  Gateway& gw = gw_[g];
  if (!o_.reweights || !load_ || !std::bernoulli_distribution(0.015)(op_rng_)) return false;
  const uint32_t id = std::uniform_int_distribution<uint32_t>(1, kCacheNodes)(op_rng_);
  const double weight =
      std::array<double, 4>{0.5, 1, 2, 3}[std::uniform_int_distribution<int>(0, 3)(op_rng_)];
  auto c = RingChange::Begin(RingChange::Kind::kReweight, gw.view, {1, 2, 3}, id, 5,
                             absl::Milliseconds(300), {0, weight, 0});
  if (!c.ok()) return false;
  Log("gw", g, " begins reweight of cn", id, " to ", weight, " (term ", gw.term, ")");
  gw.change.emplace(std::move(*c));
  gw.change_term = gw.term;
  At(Gw(g), 0, [this, g] { Step(g); });
  return true;
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
          if (s.ok()) {
            gw_[g].view = st;
            Log("gw", g, " published epoch ", st.epoch);
          }
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
      Log("gw", g, " change of cn", c.node(), " done: ", c.status().ToString());
      if (c.status().ok()) ++res_.changes_done;
      gw.change.reset();
      return;
  }
}

void Sim::FlushOn(uint32_t id, uint64_t epoch, const std::vector<Member>* moving_under,
                  Reply reply) {
  CacheNode& n = Node(id);
  n.epoch = std::max(n.epoch, epoch);
  // Waits for the writes admitted under an older epoch (RequestGate::Advance).
  if (!n.running.empty() && n.running.begin()->first < epoch) {
    std::vector<Member> m = moving_under ? *moving_under : std::vector<Member>{};
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
                    durability_changed_ = true;
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
  // A join's ring has the joiner; a reweight's, the node at its new weight (and no joiner).
  const bool reweight = gw.change->kind() == RingChange::Kind::kReweight;
  const uint32_t joiner = reweight ? 0 : gw.change->node();
  const CacheRingState st = gw.view;
  const std::vector<Member> next = Members(st, joiner, reweight);
  const uint64_t epoch = st.epoch;
  const uint64_t term = gw.control_term;
  std::vector<Member> members = Members(st);
  // One member after the other, then the joiner (Router::Handoff).
  auto chain = std::make_shared<std::function<void(size_t)>>();
  *chain = [this, g, members, next, epoch, term, joiner, done, chain](size_t i) {
    if (i == members.size() && joiner == 0) return done(absl::OkStatus());
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
    const uint32_t m = members[i].id;
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


}  // namespace ringcache::coordinator::sim::internal
