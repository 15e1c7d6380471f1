// Exclusive RAM/SSD placement over a cache's members (see placement.h).
#include "cachenode/policy/placement.h"

#include <algorithm>
#include <list>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringcache::policy {
namespace {

// Two lists, each split into a RAM head and an SSD tail: list order is recency (front = MRU).
// For "lru" only list 0 is used and its RAM head is the whole RAM.
class ListPlacement : public Placement {
 public:
  ListPlacement(size_t ram, bool arc, uint32_t sieve, bool exclusive)
      : ram_cap_(ram), arc_(arc), sieve_(sieve), exclusive_(exclusive), target_t1_(ram / 2) {}

  Tier OnAccess(const BlockKey& key, bool admitted, std::vector<BlockKey>* demote) override {
    (void)admitted;
    auto it = index_.find(key);
    int to_list = 0;
    uint32_t accesses = 1;
    if (it != index_.end()) {
      Node& n = it->second;
      accesses = n.accesses + (n.accesses < UINT32_MAX ? 1 : 0);
      if (arc_) {
        // A hit on an SSD-resident block shows that its list deserved more RAM (ARC's ghost-hit
        // adaptation applied to the SSD part, as UARC does: paper 001 §III-A2).
        if (!n.in_ram && ram_cap_ > 0) {
          if (n.list == 0) {
            target_t1_ = std::min(ram_cap_, target_t1_ + 1);
          } else if (target_t1_ > 0) {
            --target_t1_;
          }
        }
        to_list = 1;  // seen again: T2
      }
      Unlink(n);
    }
    Node& n = index_[key];
    n.accesses = accesses;
    n.list = to_list;
    lists_[to_list].push_front(key);
    n.pos = lists_[to_list].begin();
    n.in_ram = ram_cap_ > 0;
    if (!n.in_ram) return Tier::kSsd;
    if (ram_in_[to_list]++ == 0) boundary_[to_list] = n.pos;
    Rebalance(&key, demote);
    return Tier::kRam;  // Rebalance never demotes `key`
  }

  void OnRemove(const BlockKey& key) override {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    Unlink(it->second);
    index_.erase(it);
  }

  Tier TierOf(const BlockKey& key) const override {
    auto it = index_.find(key);
    if (it == index_.end()) return Tier::kNone;
    return it->second.in_ram ? Tier::kRam : Tier::kSsd;
  }
  bool exclusive() const override { return exclusive_ && ram_cap_ > 0; }
  bool WorthSsd(const BlockKey& key) const override {
    if (sieve_ == 0) return true;
    auto it = index_.find(key);
    // SE-UARC (paper 001 §V): an SSD allocation only for a count above the threshold.
    return it != index_.end() && it->second.accesses > sieve_;
  }
  size_t ram_blocks() const override { return ram_in_[0] + ram_in_[1]; }
  size_t ram_capacity() const override { return ram_cap_; }
  void SetRamCapacity(size_t blocks, std::vector<BlockKey>* demote) override {
    // UARC's target for T1's RAM share (ARC's p) keeps its fraction of the tier: what it
    // learned about the workload stays true of a larger or smaller RAM.
    target_t1_ = ram_cap_ == 0 ? blocks / 2 : target_t1_ * blocks / ram_cap_;
    ram_cap_ = blocks;
    Rebalance(nullptr, demote);
  }

 private:
  struct Node {
    int list = 0;
    bool in_ram = false;
    uint32_t accesses = 0;  // since the block entered the cache (SE-UARC's counter)
    std::list<BlockKey>::iterator pos;
  };

  // Removes n from its list, keeping RAM blocks a prefix whose last element is boundary_.
  // Invariant: the RAM blocks of list l are exactly its first ram_in_[l] elements.
  void Unlink(Node& n) {
    const int l = n.list;
    if (n.in_ram) {
      if (n.pos == boundary_[l] && ram_in_[l] > 1) boundary_[l] = std::prev(n.pos);
      --ram_in_[l];
    }
    lists_[l].erase(n.pos);
  }

  // Demotes least recent RAM blocks until RAM fits, never *keep (the block being accessed; null
  // for none).
  void Rebalance(const BlockKey* keep, std::vector<BlockKey>* demote) {
    while (ram_in_[0] + ram_in_[1] > ram_cap_) {
      int from = 0;
      if (arc_) {
        // Take from T1 when it holds more RAM than its target, else from T2 (ARC's REPLACE rule
        // as UARC applies it to the RAM/SSD boundary, paper 001 §III-A2).
        from = ram_in_[0] > target_t1_ ? 0 : 1;
      }
      auto kept = [&](int l) { return keep != nullptr && *boundary_[l] == *keep; };
      if (ram_in_[from] == 0 || kept(from)) from = 1 - from;
      if (ram_in_[from] == 0 || kept(from)) break;
      auto pos = boundary_[from];
      Node& victim = index_[*pos];
      victim.in_ram = false;
      if (--ram_in_[from] > 0) boundary_[from] = std::prev(pos);
      demote->push_back(*pos);
    }
  }

  size_t ram_cap_;
  const bool arc_;
  const uint32_t sieve_;  // 0: no sieve
  const bool exclusive_;
  size_t target_t1_;
  std::list<BlockKey> lists_[2];
  std::list<BlockKey>::iterator boundary_[2];
  size_t ram_in_[2] = {0, 0};
  absl::flat_hash_map<BlockKey, Node> index_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Placement>> MakePlacement(const std::string& spec,
                                                         size_t ram_blocks) {
  std::string name = spec;
  uint32_t sieve = 0;
  bool exclusive = false;
  if (const size_t open = spec.find('('); open != std::string::npos) {
    name = spec.substr(0, open);
    const auto bad = [&spec](std::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad RAM placement '", spec, "': ", std::string(why),
                       " (want NAME, or NAME(P,...) with P one of sieve=N (N >= 1), exclusive)"));
    };
    if (spec.back() != ')') return bad("no closing ')'");
    const std::string params = spec.substr(open + 1, spec.size() - open - 2);
    if (params.empty()) return bad("empty parameter list");
    for (absl::string_view p : absl::StrSplit(params, ',')) {
      constexpr absl::string_view kSieve = "sieve=";
      if (p == "exclusive") {
        exclusive = true;
      } else if (absl::StartsWith(p, kSieve)) {
        if (!absl::SimpleAtoi(p.substr(kSieve.size()), &sieve) || sieve == 0) {
          return bad("sieve wants a count N >= 1");
        }
      } else {
        return bad(absl::StrCat("unknown parameter '", std::string(p), "'"));
      }
    }
  }
  if (name == "lru") return std::make_unique<ListPlacement>(ram_blocks, false, sieve, exclusive);
  if (name == "uarc") return std::make_unique<ListPlacement>(ram_blocks, true, sieve, exclusive);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown RAM placement '", spec, "' (known: lru, uarc, NAME(sieve=N), NAME(exclusive))"));
}

}  // namespace ringcache::policy
