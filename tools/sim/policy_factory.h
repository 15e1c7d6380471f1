// The bridge from ringcache-sim's PolicyRequest to the policy engine's registry
// (cachenode/policy/registry.h, MakePolicy): the simulator builds every policy by name through
// it, exactly as the cache node does.
//
// Thread-safety: the returned factory is stateless and may be called from any thread.
#ifndef RINGCACHE_TOOLS_SIM_POLICY_FACTORY_H_
#define RINGCACHE_TOOLS_SIM_POLICY_FACTORY_H_

#include "tools/sim/runner.h"

namespace ringcache::sim {

// Returns a factory that calls policy::MakePolicy(spec, context). Extra specs of the simulator's
// own: "none" (alias "null") caches nothing, every access goes to the data nodes: the no-cache
// baseline, and the anchor that measures the simulator's overhead.
PolicyFactory RegistryPolicyFactory();

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_POLICY_FACTORY_H_
