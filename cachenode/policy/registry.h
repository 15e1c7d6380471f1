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
#include "cachenode/policy/types.h"

namespace ringcache::policy {

// What a policy is built for.
struct PolicyContext {
  size_t capacity_blocks = 0;        // cache blocks (the SSD tier for iarc/garc/uarc)
  size_t ram_blocks = 0;             // RAM-tier blocks, for iarc/garc/uarc only
  const LoadView* load = nullptr;    // data-node load for lcr; not owned, must outlive the policy
  uint32_t blocks_per_region = 0;    // RPAC region size hint in blocks (0: RPAC's default)
};

// Returns the policy `spec` describes, sized by `ctx`, or kInvalidArgument naming the bad token.
absl::StatusOr<std::unique_ptr<CachePolicy>> MakePolicy(std::string_view spec,
                                                        const PolicyContext& ctx);

// Returns the specs of the standard configurations, one per line of the comparison tables
// (every component name appears in at least one).
std::vector<std::string> KnownPolicies();

// Returns every component name the grammar accepts.
std::vector<std::string> KnownComponents();

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_REGISTRY_H_
