// The policy registry: builds any cache configuration from a spec string, explicitly (no static
// initialisers that a linker could drop). ringcache-sim and the cache node both construct their
// policies here.
//
// Spec grammar (README.md has the full table of components and parameters):
//   spec      := component ( '+' component )*
//   component := name [ '(' [ param ( ',' param )* ] ')' ]
//   param     := key '=' value
// Components are grouped by role; each role at most once, bypasses any number of times (distinct):
//   order      lru | fifo | arc | s3fifo | cflru              (default lru)
//   space      vbq                                          (default: one global queue)
//   admission  always | sieve | rpac                        (default always)
//   bypass     cmf | seqcut
//   victim     lcr                                          (default: the order's tail)
//   complete   iarc | garc | uarc | opt                     (alone: a whole policy)
// Examples: "lru", "vbq+lru+sieve", "vbq+lru+sieve+lcr", "fifo+rpac(c=1.5)", "lru+cmf",
// "lru+sieve(threshold=2,len=4096)", "uarc", "opt". Order of components does not matter.
// An unknown name, parameter or bad value returns kInvalidArgument naming the token.
//
// Thread-safety: MakePolicy and KnownPolicies are thread-safe (no shared state).
#ifndef RINGCACHE_CACHENODE_POLICY_REGISTRY_H_
#define RINGCACHE_CACHENODE_POLICY_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cachenode/policy/placement.h"
#include "cachenode/policy/types.h"
#include "cachenode/policy/write_budget.h"

namespace ringcache::policy {

// The cache node's default policy (cluster file `policy:`, ringcache-local --policy): VBQ queues
// sized by the utility of space (vbq.h), ARC order in each queue (arc.h), sieve admission with
// the frequency gate in front (sieve.h, freq=1) whose region test's margin follows each VDI's
// evidence (region_adapt=1), a block seen before by the gate's sketch admitted (seen=1), write
// misses judged as read misses are, a refused one written around (writes=1), LCR victims.
// docs/experiments.md (E7, E7i, E7j, E7k, E7l) shows why.
inline constexpr char kDefaultPolicy[] =
    "vbq(share=utility)+arc+sieve(freq=1,region_adapt=1,seen=1,writes=1)+lcr";
// The default until 2026-12-02 (read misses judged only, the sieve-LRU its only memory of first
// misses), kept for comparisons.
inline constexpr char kPreviousDefaultPolicy[] =
    "vbq(share=utility)+arc+sieve(freq=1,region_adapt=1)+lcr";

// What a policy is built for.
struct PolicyContext {
  size_t capacity_blocks = 0;      // cache blocks (the SSD tier for iarc/garc/uarc)
  size_t ram_blocks = 0;           // RAM-tier blocks, for iarc/garc/uarc only
  const LoadView* load = nullptr;  // data-node load for lcr; not owned, must outlive the policy
  uint32_t blocks_per_region = 0;  // RPAC region size hint in blocks (0: RPAC's default)
  // The SSD write budget (write_budget.h), shared with its owner: a driver spec and every
  // per-VDI rule set built with it send misses around while the budget says so. Complete
  // policies (iarc, garc, uarc, opt) run without it. Null: no budget.
  std::shared_ptr<WriteBudget> write_budget;
};

// Returns the policy `spec` describes, sized by `ctx`, or kInvalidArgument naming the bad token.
absl::StatusOr<std::unique_ptr<CachePolicy>> MakePolicy(std::string_view spec,
                                                        const PolicyContext& ctx);

// Whether `spec` parses and names a complete policy (iarc, garc, uarc, opt): one with its own
// tiers or future, which runs alone, never under a placement or per VDI.
bool IsCompletePolicy(std::string_view spec);

// The context the cache node builds its membership policy with: ctx.capacity_blocks are its
// SSD slots, plus the RAM tier's blocks when `placement` is exclusive (it adds capacity).
PolicyContext NodeMembershipContext(const PolicyContext& ctx, const Placement& placement);

// The cache node's tiers as one policy (node_tiers.h): `spec` (a driver spec, not a complete
// policy) decides membership over NodeMembershipContext(ctx), `placement` ("uarc", "lru",
// optionally exclusive) puts ctx.ram_blocks of its members in RAM over ctx.capacity_blocks SSD
// slots, and hits and SSD writes count as the node counts them. ringcache-sim runs this for
// --placement.
absl::StatusOr<std::unique_ptr<CachePolicy>> MakeNodePolicy(std::string_view spec,
                                                            std::string_view placement,
                                                            const PolicyContext& ctx);

// Per-VDI policies. A VDI's spec names its queue's order, admission, bypasses and victim (the
// roles of a driver spec without the space: "lru", "arc+sieve", "s3fifo+cmf+lcr", ...); the
// node's space (vbq) still shares the cache among VDIs. Complete policies (iarc, garc, uarc,
// opt), a space (vbq) and rpac (it judges replacements, which VBQ's reclaim rounds do not allow)
// are refused with kInvalidArgument. "" and "default" mean the node's own policy.
//
// The spec as stored and shown: whitespace removed, "default" as "".
std::string CanonicalVdiPolicy(std::string_view spec);
// Checks a per-VDI spec without applying it.
absl::Status ValidateVdiPolicy(std::string_view spec, const PolicyContext& ctx);
// Switches `vdi` of `node` (a policy MakePolicy built) to `spec`. The VDI's cached blocks, with
// their dirty state, move into the new order; admission and bypass state starts fresh.
// kFailedPrecondition if `node` has no per-VDI queues (no vbq space, or a complete policy).
absl::Status SetVdiPolicy(CachePolicy* node, uint32_t vdi, std::string_view spec,
                          const PolicyContext& ctx);
// The spec `vdi` runs under on `node`: its own, or "" for the node's.
// Gives `vdi` a minimum and maximum share of the node's cache (a VbqSpace composes them with its
// bounds: vbq.h). kFailedPrecondition for a complete policy or a node policy without 'vbq';
// kInvalidArgument for shares out of range or minimums summing past the reclaim's stop point.
absl::Status SetVdiShare(CachePolicy* node, uint32_t vdi, double min, double max);
std::string VdiPolicyOf(const CachePolicy& node, uint32_t vdi);

// Returns the specs of the standard configurations, one per line of the comparison tables
// (every component name appears in at least one).
std::vector<std::string> KnownPolicies();

// Returns every component name the grammar accepts.
std::vector<std::string> KnownComponents();

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_REGISTRY_H_
