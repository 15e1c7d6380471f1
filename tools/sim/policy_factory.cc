// See policy_factory.h.
#include "tools/sim/policy_factory.h"

#ifdef RC_SIM_HAVE_REGISTRY
#include "cachenode/policy/registry.h"
#endif

namespace ringcache::sim {
namespace {

// Caches nothing: every access misses and is bypassed ("none", the no-cache baseline of the
// experiments; "null", the same, as bench_sim.sh's anchor of the simulator's own cost).
class NullPolicy final : public policy::CachePolicy {
 public:
  explicit NullPolicy(size_t capacity) : capacity_(capacity) {}
  std::string_view name() const override { return "null"; }
  void OnAccess(const policy::Access&, policy::Outcome* out) override {
    out->Reset();
    out->bypassed = true;
  }
  bool MarkClean(const policy::BlockKey&) override { return false; }
  bool Erase(const policy::BlockKey&) override { return false; }
  policy::Tier Lookup(const policy::BlockKey&) const override { return policy::Tier::kNone; }
  size_t size() const override { return 0; }
  size_t capacity() const override { return capacity_; }
  size_t dirty_count() const override { return 0; }
  size_t MetadataBytes() const override { return 0; }

 private:
  size_t capacity_;
};

}  // namespace

PolicyFactory RegistryPolicyFactory() {
  return [](const PolicyRequest& req)
             -> absl::StatusOr<std::unique_ptr<policy::CachePolicy>> {
    if (req.spec == "null" || req.spec == "none") {
      return std::unique_ptr<policy::CachePolicy>(new NullPolicy(req.capacity_blocks));
    }
#ifdef RC_SIM_HAVE_REGISTRY
    policy::PolicyContext ctx;
    ctx.capacity_blocks = req.capacity_blocks;
    ctx.ram_blocks = req.ram_blocks;
    ctx.load = req.load;
    ctx.write_budget = req.write_budget;
    // A complete policy runs its own tiers: the placement applies to driver specs only.
    if (!req.placement.empty() && !policy::IsCompletePolicy(req.spec)) {
      return policy::MakeNodePolicy(req.spec, req.placement, ctx);
    }
    return policy::MakePolicy(req.spec, ctx);
#else
    (void)req;
    return absl::UnimplementedError("the policy registry (cachenode/policy/registry.h) is not built yet");
#endif
  };
}

}  // namespace ringcache::sim
