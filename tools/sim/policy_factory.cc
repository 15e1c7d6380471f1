// See policy_factory.h.
#include "tools/sim/policy_factory.h"

#ifdef RC_SIM_HAVE_REGISTRY
#include "cachenode/policy/registry.h"
#endif

namespace ringcache::sim {

PolicyFactory RegistryPolicyFactory() {
  return [](const PolicyRequest& req)
             -> absl::StatusOr<std::unique_ptr<policy::CachePolicy>> {
#ifdef RC_SIM_HAVE_REGISTRY
    policy::PolicyContext ctx;
    ctx.capacity_blocks = req.capacity_blocks;
    ctx.ram_blocks = req.ram_blocks;
    ctx.load = req.load;
    return policy::MakePolicy(req.spec, ctx);
#else
    (void)req;
    return absl::UnimplementedError("the policy registry (cachenode/policy/registry.h) is not built yet");
#endif
  };
}

}  // namespace ringcache::sim
