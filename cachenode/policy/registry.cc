// The policy registry: see registry.h. Parameter checking and assembly of a CacheDriver from its
// parts (or a call to a complete policy's factory); the spec grammar is in spec_parser.h.
#include "cachenode/policy/registry.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "cachenode/policy/arc.h"
#include "cachenode/policy/cflru.h"
#include "cachenode/policy/cmf.h"
#include "cachenode/policy/driver.h"
#include "cachenode/policy/fifo.h"
#include "cachenode/policy/lcr.h"
#include "cachenode/policy/lru.h"
#include "cachenode/policy/node_tiers.h"
#include "cachenode/policy/opt.h"
#include "cachenode/policy/placement.h"
#include "cachenode/policy/rpac.h"
#include "cachenode/policy/s3fifo.h"
#include "cachenode/policy/seq_cutoff.h"
#include "cachenode/policy/sieve.h"
#include "cachenode/policy/spec_parser.h"
#include "cachenode/policy/tiering.h"
#include "cachenode/policy/vbq.h"
#include "common/policy_spec.h"

namespace ringcache::policy {
namespace {

using spec::Component;
using spec::Params;
using spec::Parse;
using spec::Role;
using spec::RoleName;

size_t Clamp(size_t v, size_t lo, size_t hi) { return std::max(lo, std::min(v, hi)); }

absl::StatusOr<OrderFactory> BuildOrder(const Component* c, const PolicyContext& ctx) {
  if (c == nullptr || c->name == "lru") {
    if (c) {
      if (absl::Status s = Params(*c).Finish(); !s.ok()) return s;
    }
    return OrderFactory([](SlotTable* t, size_t) { return std::make_unique<LruOrder>(t); });
  }
  Params p(*c);
  if (c->name == "fifo") {
    if (absl::Status s = p.Finish(); !s.ok()) return s;
    return OrderFactory([](SlotTable* t, size_t) { return std::make_unique<FifoOrder>(t); });
  }
  if (c->name == "arc") {
    if (absl::Status s = p.Finish(); !s.ok()) return s;
    return OrderFactory(
        [](SlotTable* t, size_t cap) { return std::make_unique<ArcOrder>(t, cap); });
  }
  if (c->name == "s3fifo") {
    S3FifoConfig cfg;
    for (absl::Status s : {p.Double("small", &cfg.small_ratio), p.Double("ghost", &cfg.ghost_ratio),
                           p.UintAs("move", &cfg.move_threshold), p.Finish(), cfg.Validate()}) {
      if (!s.ok()) return s;
    }
    return OrderFactory(
        [cfg](SlotTable* t, size_t cap) { return std::make_unique<S3FifoOrder>(t, cap, cfg); });
  }
  // cflru
  CflruConfig cfg;
  for (absl::Status s : {p.UintAs("window", &cfg.window), p.Finish(), cfg.Validate()}) {
    if (!s.ok()) return s;
  }
  const size_t window = cfg.window > 0 ? cfg.window : Clamp(ctx.capacity_blocks / 4, 1, 256);
  return OrderFactory(
      [window](SlotTable* t, size_t) { return std::make_unique<CflruOrder>(t, window); });
}

absl::StatusOr<std::unique_ptr<Admission>> BuildAdmission(const Component* c,
                                                          const PolicyContext& ctx) {
  if (c == nullptr || c->name == "always") {
    if (c) {
      if (absl::Status s = Params(*c).Finish(); !s.ok()) return s;
    }
    return std::unique_ptr<Admission>(std::make_unique<AlwaysAdmit>());
  }
  Params p(*c);
  if (c->name == "sieve") {
    SieveConfig cfg;
    // The climber's window: twice the cache in accesses (a VDI's own), so that what a step
    // changed has reached the cache's contents before it is judged.
    cfg.climber.window = std::max<uint64_t>(1024, 2 * ctx.capacity_blocks);
    // kGhost's horizon: the same two caches of accesses.
    cfg.horizon = cfg.climber.window;
    int adapt = 0;
    // One write budget: the margins' (off unless given) and the climber's and regret tuner's
    // (4 unless given, as measured in docs/experiments.md E7g/E7h).
    double budget = std::numeric_limits<double>::quiet_NaN();
    for (absl::Status s :
         {p.UintAs("threshold", &cfg.threshold), p.UintAs("len", &cfg.length),
          p.Word("adapt", {"0", "false", "1", "true", "ghost"}, &adapt),
          p.Double("budget", &budget), p.Uint("window", &cfg.climber.window),
          p.Double("start", &cfg.climber.initial), p.Uint("horizon", &cfg.horizon),
          p.Bool("freq", &cfg.freq), p.Double("margin", &cfg.margin),
          p.Double("region_margin", &cfg.region_margin), p.Bool("region_adapt", &cfg.region_adapt),
          p.Double("region_waste", &cfg.region_waste),
          p.UintAs("region", &cfg.region), p.Bool("seen", &cfg.seen),
          p.Bool("writes", &cfg.judge_writes)}) {
      if (!s.ok()) return s;
    }
    cfg.adapt = adapt < 2   ? SieveConfig::Adapt::kOff
                : adapt < 4 ? SieveConfig::Adapt::kClimb
                            : SieveConfig::Adapt::kGhost;
    if (!std::isnan(budget)) cfg.budget = cfg.climber.budget = budget;
    cfg.regret.budget = cfg.climber.budget;
    cfg.regret.initial = cfg.climber.initial;
    cfg.capacity = ctx.capacity_blocks;
    for (absl::Status s : {p.Finish(), cfg.Validate()}) {
      if (!s.ok()) return s;
    }
    if (cfg.length == 0) cfg.length = std::max<size_t>(16, ctx.capacity_blocks / 4);
    return std::unique_ptr<Admission>(std::make_unique<SieveAdmission>(cfg));
  }
  // rpac
  RpacConfig cfg;
  if (ctx.blocks_per_region > 0) cfg.region_blocks = ctx.blocks_per_region;
  for (absl::Status s : {p.UintAs("region", &cfg.region_blocks), p.UintAs("depth", &cfg.depth),
                         p.Uint("cycle", &cfg.cycle), p.Double("alpha", &cfg.alpha),
                         p.Double("c", &cfg.c), p.UintAs("scan", &cfg.scan),
                         p.Bool("writes", &cfg.judge_writes), p.Finish(), cfg.Validate()}) {
    if (!s.ok()) return s;
  }
  return std::unique_ptr<Admission>(std::make_unique<RpacAdmission>(cfg));
}

absl::StatusOr<std::unique_ptr<Bypass>> BuildBypass(const Component& c) {
  Params p(c);
  if (c.name == "cmf") {
    CmfConfig cfg;
    for (absl::Status s :
         {p.Double("threshold", &cfg.miss_threshold), p.Uint("window", &cfg.window),
          p.Uint("interval_us", &cfg.check_interval_us), p.Uint("reenable", &cfg.reenable_ops),
          p.Finish(), cfg.Validate()}) {
      if (!s.ok()) return s;
    }
    return std::unique_ptr<Bypass>(std::make_unique<CmfBypass>(cfg));
  }
  SeqCutoffConfig cfg;
  for (absl::Status s : {p.Uint("cutoff", &cfg.cutoff_blocks), p.UintAs("streams", &cfg.streams),
                         p.Finish(), cfg.Validate()}) {
    if (!s.ok()) return s;
  }
  return std::unique_ptr<Bypass>(std::make_unique<SeqCutoffBypass>(cfg));
}

absl::StatusOr<std::unique_ptr<CachePolicy>> BuildComplete(const Component& c,
                                                           const PolicyContext& ctx) {
  Params p(c);
  if (c.name == "opt") {
    OptConfig cfg;
    cfg.capacity_blocks = ctx.capacity_blocks;
    for (absl::Status s : {p.Bool("bypass", &cfg.allow_bypass), p.Finish(), cfg.Validate()}) {
      if (!s.ok()) return s;
    }
    std::unique_ptr<CachePolicy> opt = MakeBeladyOpt(cfg);
    if (!opt) return absl::InvalidArgumentError("opt: invalid configuration");
    return opt;
  }
  TierConfig cfg;
  cfg.ram_blocks = ctx.ram_blocks;
  cfg.ssd_blocks = ctx.capacity_blocks;
  for (absl::Status s : {p.UintAs("ram", &cfg.ram_blocks), p.Finish()}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = cfg.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(c.name, ": ", s.message()));
  }
  std::unique_ptr<CachePolicy> policy = c.name == "iarc"   ? MakeIarc(cfg)
                                        : c.name == "garc" ? MakeGarc(cfg)
                                                           : MakeUarc(cfg);
  if (!policy) return absl::InvalidArgumentError(absl::StrCat(c.name, ": invalid configuration"));
  return policy;
}

// The components of a spec sorted by role.
struct Roles {
  const Component* order = nullptr;
  const Component* space = nullptr;
  const Component* admission = nullptr;
  const Component* victim = nullptr;
  const Component* complete = nullptr;
  std::vector<const Component*> bypasses;
};

absl::StatusOr<Roles> GroupByRole(const std::vector<Component>& comps, absl::string_view spec) {
  Roles r;
  for (const Component& c : comps) {
    if (c.role == Role::kComplete && comps.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", c.name, "' is a complete policy and cannot be combined in '", spec, "'"));
    }
    if (c.role == Role::kBypass) {
      for (const Component* b : r.bypasses) {
        if (b->name == c.name) {
          return absl::InvalidArgumentError(
              absl::StrCat("'", c.name, "' given twice in '", spec, "'"));
        }
      }
      r.bypasses.push_back(&c);
      continue;
    }
    const Component** slot = c.role == Role::kOrder       ? &r.order
                             : c.role == Role::kSpace     ? &r.space
                             : c.role == Role::kAdmission ? &r.admission
                             : c.role == Role::kVictim    ? &r.victim
                                                          : &r.complete;
    if (*slot != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("more than one ", RoleName(c.role), " ('",
                                                     (*slot)->name, "' and '", c.name, "') in '",
                                                     spec, "'"));
    }
    *slot = &c;
  }
  if (r.space != nullptr && r.admission != nullptr && r.admission->name == "rpac") {
    return absl::InvalidArgumentError(
        "'rpac' cannot be combined with 'vbq': VBQ reclaims in rounds, RPAC judges one "
        "replacement per miss");
  }
  return r;
}

using SpaceMaker = std::function<std::unique_ptr<Space>(SlotTable*)>;

absl::StatusOr<SpaceMaker> BuildSpace(const Component* c, size_t capacity, OrderFactory order) {
  if (c == nullptr) {
    return SpaceMaker([capacity, order = std::move(order)](SlotTable* t) {
      return std::make_unique<GlobalSpace>(capacity, t, order);
    });
  }
  VbqConfig cfg;
  Params p(*c);
  int share = 0;
  for (absl::Status s :
       {p.Double("umax", &cfg.u_max), p.Double("umin", &cfg.u_min), p.Double("dmax", &cfg.d_max),
        p.Double("dmin", &cfg.d_min), p.Double("xi", &cfg.xi), p.Double("alpha", &cfg.alpha),
        p.Uint("decay", &cfg.decay_interval), p.Word("share", {"accesses", "utility"}, &share),
        p.Double("step", &cfg.step), p.Double("ghost", &cfg.ghost), p.Finish()}) {
    if (!s.ok()) return s;
  }
  cfg.share = share == 1 ? VbqShare::kUtility : VbqShare::kAccesses;
  if (absl::Status s = cfg.Validate(); !s.ok()) return s;
  return SpaceMaker([capacity, cfg, order = std::move(order)](SlotTable* t) {
    return std::make_unique<VbqSpace>(capacity, cfg, t, order);
  });
}

absl::StatusOr<std::unique_ptr<VictimChooser>> BuildVictim(const Component* c,
                                                           const PolicyContext& ctx) {
  if (c == nullptr) return std::unique_ptr<VictimChooser>(std::make_unique<TailVictim>());
  LcrConfig cfg;
  Params p(*c);
  for (absl::Status s : {p.UintAs("window", &cfg.window), p.Finish(), cfg.Validate()}) {
    if (!s.ok()) return s;
  }
  const size_t window = cfg.window > 0 ? cfg.window : Clamp(ctx.capacity_blocks / 64, 1, 256);
  return std::unique_ptr<VictimChooser>(std::make_unique<LcrVictim>(window, ctx.load));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CachePolicy>> MakePolicy(std::string_view spec_in,
                                                        const PolicyContext& ctx) {
  // Debian's abseil has its own string_view type; convert once at the edge.
  const absl::string_view spec(spec_in.data(), spec_in.size());
  absl::StatusOr<std::vector<Component>> parsed = Parse(spec);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<Roles> roles = GroupByRole(*parsed, spec);
  if (!roles.ok()) return roles.status();
  if (ctx.capacity_blocks < 1) {
    return absl::InvalidArgumentError("policy context: capacity_blocks must be >= 1");
  }
  if (roles->complete != nullptr) return BuildComplete(*roles->complete, ctx);

  absl::StatusOr<OrderFactory> order = BuildOrder(roles->order, ctx);
  if (!order.ok()) return order.status();
  absl::StatusOr<SpaceMaker> space = BuildSpace(roles->space, ctx.capacity_blocks, *order);
  if (!space.ok()) return space.status();
  absl::StatusOr<std::unique_ptr<Admission>> admission = BuildAdmission(roles->admission, ctx);
  if (!admission.ok()) return admission.status();
  absl::StatusOr<std::unique_ptr<VictimChooser>> victim = BuildVictim(roles->victim, ctx);
  if (!victim.ok()) return victim.status();

  DriverParts parts;
  parts.make_space = *std::move(space);
  parts.admission = *std::move(admission);
  parts.victim = *std::move(victim);
  for (const Component* b : roles->bypasses) {
    absl::StatusOr<std::unique_ptr<Bypass>> bp = BuildBypass(*b);
    if (!bp.ok()) return bp.status();
    parts.bypasses.push_back(*std::move(bp));
  }
  if (ctx.write_budget != nullptr) {
    parts.bypasses.push_back(std::make_unique<BudgetBypass>(ctx.write_budget));
  }

  DriverConfig dc;
  dc.name = std::string(spec);
  dc.name.erase(std::remove_if(dc.name.begin(), dc.name.end(),
                               [](unsigned char ch) { return std::isspace(ch); }),
                dc.name.end());
  dc.capacity_blocks = ctx.capacity_blocks;
  absl::StatusOr<std::unique_ptr<CacheDriver>> driver = CacheDriver::Create(dc, std::move(parts));
  if (!driver.ok()) return driver.status();
  return std::unique_ptr<CachePolicy>(*std::move(driver));
}

bool IsCompletePolicy(std::string_view spec_in) {
  absl::StatusOr<std::vector<Component>> parsed =
      Parse(absl::string_view(spec_in.data(), spec_in.size()));
  return parsed.ok() && std::any_of(parsed->begin(), parsed->end(),
                                    [](const Component& c) { return c.role == Role::kComplete; });
}

PolicyContext NodeMembershipContext(const PolicyContext& ctx, const Placement& placement) {
  PolicyContext out = ctx;
  if (placement.exclusive()) out.capacity_blocks += placement.ram_capacity();
  return out;
}

absl::StatusOr<std::unique_ptr<CachePolicy>> MakeNodePolicy(std::string_view spec_in,
                                                            std::string_view placement,
                                                            const PolicyContext& ctx) {
  const absl::string_view spec(spec_in.data(), spec_in.size());
  absl::StatusOr<std::vector<Component>> parsed = Parse(spec);
  if (!parsed.ok()) return parsed.status();
  for (const Component& c : *parsed) {
    if (c.role == Role::kComplete) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", c.name, "' is a complete policy with its own tiers; a placement needs a driver "
          "spec (e.g. vbq+lru+sieve)"));
    }
  }
  absl::StatusOr<std::unique_ptr<Placement>> place =
      MakePlacement(std::string(placement), ctx.ram_blocks);
  if (!place.ok()) return place.status();
  absl::StatusOr<std::unique_ptr<CachePolicy>> membership =
      MakePolicy(spec_in, NodeMembershipContext(ctx, **place));
  if (!membership.ok()) return membership.status();
  return std::unique_ptr<CachePolicy>(std::make_unique<NodeTiers>(
      *std::move(membership), *std::move(place), std::string(placement), ctx.capacity_blocks));
}

std::string CanonicalVdiPolicy(std::string_view spec) { return CanonicalPolicySpec(spec); }

namespace {

bool IsNodeDefault(absl::string_view spec) {
  return CanonicalVdiPolicy(std::string_view(spec.data(), spec.size())).empty();
}

absl::StatusOr<std::unique_ptr<VdiRules>> MakeVdiRules(absl::string_view spec,
                                                       const PolicyContext& ctx) {
  absl::StatusOr<std::vector<Component>> parsed = Parse(spec);
  if (!parsed.ok()) return parsed.status();
  for (const Component& c : *parsed) {
    if (c.role == Role::kComplete) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", c.name,
                       "' is a complete policy of the whole node (RAM and SSD tiers or the "
                       "future of a trace); set it in the cluster file, not per VDI"));
    }
    if (c.role == Role::kSpace) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", c.name,
                       "' shares the cache among VDIs and is the node's; a VDI's spec names "
                       "its order, admission, bypasses and victim"));
    }
    if (c.name == "rpac") {
      return absl::InvalidArgumentError(
          "'rpac' judges replacements, which the node's VBQ reclaim rounds do not allow; use "
          "it as the node policy (cluster file) without vbq");
    }
  }
  absl::StatusOr<Roles> roles = GroupByRole(*parsed, spec);
  if (!roles.ok()) return roles.status();
  if (ctx.capacity_blocks < 1) {
    return absl::InvalidArgumentError("policy context: capacity_blocks must be >= 1");
  }
  auto rules = std::make_unique<VdiRules>();
  rules->spec = CanonicalVdiPolicy(std::string_view(spec.data(), spec.size()));
  absl::StatusOr<OrderFactory> order = BuildOrder(roles->order, ctx);
  if (!order.ok()) return order.status();
  rules->order = *std::move(order);
  absl::StatusOr<std::unique_ptr<Admission>> admission = BuildAdmission(roles->admission, ctx);
  if (!admission.ok()) return admission.status();
  rules->admission = *std::move(admission);
  absl::StatusOr<std::unique_ptr<VictimChooser>> victim = BuildVictim(roles->victim, ctx);
  if (!victim.ok()) return victim.status();
  rules->victim = *std::move(victim);
  for (const Component* b : roles->bypasses) {
    absl::StatusOr<std::unique_ptr<Bypass>> bp = BuildBypass(*b);
    if (!bp.ok()) return bp.status();
    rules->bypasses.push_back(*std::move(bp));
  }
  if (ctx.write_budget != nullptr) {
    rules->bypasses.push_back(std::make_unique<BudgetBypass>(ctx.write_budget));
  }
  return rules;
}

}  // namespace

absl::Status ValidateVdiPolicy(std::string_view spec_in, const PolicyContext& ctx) {
  const absl::string_view spec(spec_in.data(), spec_in.size());
  if (IsNodeDefault(spec)) return absl::OkStatus();
  return MakeVdiRules(spec, ctx).status();
}

absl::Status SetVdiPolicy(CachePolicy* node, uint32_t vdi, std::string_view spec_in,
                          const PolicyContext& ctx) {
  const absl::string_view spec(spec_in.data(), spec_in.size());
  auto* driver = dynamic_cast<CacheDriver*>(node);
  if (driver == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the node policy '", std::string(node->name()),
        "' is a complete policy; per-VDI policies need a node policy with a 'vbq' space"));
  }
  if (IsNodeDefault(spec)) return driver->SetVdiRules(vdi, nullptr);
  absl::StatusOr<std::unique_ptr<VdiRules>> rules = MakeVdiRules(spec, ctx);
  if (!rules.ok()) return rules.status();
  return driver->SetVdiRules(vdi, *std::move(rules));
}

absl::Status SetVdiShare(CachePolicy* node, uint32_t vdi, double min, double max) {
  auto* driver = dynamic_cast<CacheDriver*>(node);
  if (driver == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the node policy '", std::string(node->name()),
        "' is a complete policy; a share of the cache per VDI needs a 'vbq' space"));
  }
  return driver->SetVdiShare(vdi, min, max);
}

std::string VdiPolicyOf(const CachePolicy& node, uint32_t vdi) {
  const auto* driver = dynamic_cast<const CacheDriver*>(&node);
  return driver == nullptr ? std::string() : std::string(driver->VdiSpec(vdi));
}

std::vector<std::string> KnownPolicies() {
  return {"lru",         "fifo",          "arc",
          "s3fifo",      "cflru",         "lru+sieve",
          "vbq+lru",     "vbq+lru+sieve", "vbq+lru+sieve+lcr",
          "lru+lcr",     "fifo+rpac",     "lru+rpac",
          "lru+cmf",     "lru+seqcut",    "iarc",
          "garc",        "uarc",          "opt",
          kDefaultPolicy};
}

std::vector<std::string> KnownComponents() { return spec::ComponentNames(); }

}  // namespace ringcache::policy
