// Ring: consistent hashing with virtual nodes, used twice (docs/design.md §3): the cache ring picks
// an object's owning cache node, the data ring picks its N home replicas. Pure code: no I/O, no
// clock, no threads, no randomness beyond the stable hashes of hash.h, so every process that builds
// a ring from the same membership computes the same owners.
//
// Placement (why, and the figures: ring/README.md).
//  - Each member gets round(vnodes_per_node × weight) virtual nodes (vnodes) at
//    HashVnode(id, 0..count-1) on the 2^64 circle. A member's points depend only on its id and
//    weight, never on the other members.
//  - Classic consistent hashing gives a key at position x to the first vnode clockwise of x. With
//    128 vnodes a node's share then varies by ~1/sqrt(128) ≈ 8.5%, so 10 nodes see max/mean ≈ 1.13
//    on average and above 1.15 for about one membership in three.
//  - This ring uses multi-probe consistent hashing (Appleton & O'Reilly, "Multi-probe consistent
//    hashing", arXiv:1505.00062, 2015) on top of the vnodes: a key at x is looked at from `probes`
//    positions x + ProbeOffset(j), j = 0..probes-1 (fixed offsets, ProbeOffset(0) = 0), and each
//    member scores the clockwise distance from the nearest probe to its nearest vnode after that
//    probe. Members are ranked by (score, id): the first is the owner, the next ones the replicas.
//    A vnode behind a long gap no longer wins that whole gap (a probe elsewhere on the circle
//    usually finds something closer), so a node's share averages over probes × vnodes arcs and
//    its spread falls roughly as 1/sqrt(probes): 3.5–3.9% at the default 8 probes. probes = 1 is
//    exactly the classic ring.
//  - Any scheme that keeps invariant 1 below needs about that many arcs per node for this balance
//    (placement cannot depend on the other members), so the cost is memory: ~probes × vnodes
//    segments (1.5 MB for 100 nodes at the defaults, see MemoryBytes()).
// Invariants:
//  1. The ranking at a position is a total order over node ids that does not depend on which other
//     nodes are members. Hence adding a node moves keys only to it, removing one moves only its
//     keys, and changing one node's weight moves keys only to or from it.
//  2. Every member's score falls at the same rate as x moves clockwise, so the ranking changes only
//     where some probe crosses a vnode: the circle splits into at most probes × vnodes segments,
//     each a contiguous range with one owner list. The ring stores these segments (start points
//     plus the first `cached_owners` owners of each), so a lookup is a table read, and membership
//     diffs are exact lists of ranges.
//  3. Owner lists hold distinct nodes; when zones are given, distinct zones (greedy along the
//     ranking: a node whose zone is already used is skipped).
//
// Thread-safety: a Ring is immutable once built; all const methods may be called concurrently.
// A membership change builds a new Ring (callers typically swap a shared_ptr<const Ring>).
#ifndef RINGCACHE_RING_RING_H_
#define RINGCACHE_RING_RING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ring/hash.h"

namespace ringcache::ring {

// One physical node of a ring.
struct Member {
  NodeId id = 0;
  // Relative capacity; 1.0 is a default node. The node gets round(vnodes_per_node × weight) vnodes.
  double weight = 1.0;
  // Failure domain (rack, host, ...). Empty means none; either every member has a zone or none.
  std::string zone;
};

// Everything a ring is built from. Two rings built from equal configs (members in any order) are
// identical. vnodes_per_node, probes and the hashes must match across the cluster.
struct RingConfig {
  std::vector<Member> members;
  // Vnodes for a member of weight 1.0 (docs/design.md §3: 128).
  int vnodes_per_node = 128;
  // Multi-probe count; 1 = classic consistent hashing. Changing it re-places keys.
  int probes = 8;
  // Length of the owner list stored per segment (capped at max_owners()). Owner lists up to this
  // length are a table read; longer ones walk the vnodes. Does not change placement.
  int cached_owners = 3;

  // Returns OK, or kInvalidArgument naming the first problem: empty membership, duplicate id,
  // weight that is not a positive finite number or rounds to zero vnodes, zones given to some
  // members only, or an option out of range.
  absl::Status Validate() const;
};

// A range of the hash circle, [first, last] inclusive (never wraps), whose owner changed.
struct MovedRange {
  uint64_t first = 0;
  uint64_t last = 0;
  NodeId old_owner = 0;
  NodeId new_owner = 0;

  bool Contains(uint64_t hash) const { return first <= hash && hash <= last; }
  friend bool operator==(const MovedRange&, const MovedRange&) = default;
};

// A range of the hash circle, [first, last] inclusive, whose first-n owner list changed.
struct ReplicaSetChange {
  uint64_t first = 0;
  uint64_t last = 0;
  std::vector<NodeId> old_owners;
  std::vector<NodeId> new_owners;

  bool Contains(uint64_t hash) const { return first <= hash && hash <= last; }
};

struct RingChange;

class Ring {
 public:
  // Returns the ring for `config`, or the error of config.Validate().
  static absl::StatusOr<Ring> Build(RingConfig config);
  // The cache ring as every process builds it (gateway router, cache nodes, ringcache-sim
  // replay): `members` with the default vnodes and probes, and one cached owner per segment.
  static absl::StatusOr<Ring> BuildCacheRing(std::vector<Member> members);

  Ring(const Ring&) = default;
  Ring& operator=(const Ring&) = default;
  Ring(Ring&&) = default;
  Ring& operator=(Ring&&) = default;

  // Returns the node owning `key` (or the circle position `hash`).
  NodeId Owner(const ObjectKey& key) const { return OwnerOfHash(HashObjectKey(key)); }
  NodeId OwnerOfHash(uint64_t hash) const {
    return member_id_[segment_owners_[SegmentOf(hash) * cached_]];
  }

  // Writes the first out.size() owners of position `hash` into `out`: distinct nodes (distinct
  // zones when zones are given), owner first. Allocates nothing when out.size() <= cached_owners.
  // Returns kInvalidArgument for an empty `out`, kFailedPrecondition when out.size() exceeds
  // max_owners() (the membership has too few nodes, or too few zones); `out` is then untouched.
  absl::Status FillOwners(uint64_t hash, absl::Span<NodeId> out) const;
  absl::Status FillOwners(const ObjectKey& key, absl::Span<NodeId> out) const {
    return FillOwners(HashObjectKey(key), out);
  }

  // Returns the first `n` owners of `key` (or of position `hash`); errors as FillOwners.
  absl::StatusOr<std::vector<NodeId>> Owners(const ObjectKey& key, int n) const {
    return OwnersOfHash(HashObjectKey(key), n);
  }
  absl::StatusOr<std::vector<NodeId>> OwnersOfHash(uint64_t hash, int n) const;

  // Returns the ring for membership `members` (same options) and the ranges whose owner moved.
  absl::StatusOr<RingChange> WithMembers(std::vector<Member> members) const;
  // As WithMembers, for one node joining (kInvalidArgument if its id is taken) or leaving
  // (kNotFound if absent; kInvalidArgument if it is the last member).
  absl::StatusOr<RingChange> AddMember(Member member) const;
  absl::StatusOr<RingChange> RemoveMember(NodeId id) const;

  // Returns the ranges of the circle whose owner differs between `from` and `to`, sorted, maximal
  // (adjacent ranges with the same old and new owner are merged). Any two rings can be compared.
  static std::vector<MovedRange> Diff(const Ring& from, const Ring& to);
  // Returns the ranges whose first-n owner list differs. kFailedPrecondition if n exceeds either
  // ring's cached owner count (raise RingConfig::cached_owners); kInvalidArgument if n < 1.
  static absl::StatusOr<std::vector<ReplicaSetChange>> DiffReplicaSets(const Ring& from,
                                                                       const Ring& to, int n);

  // The config the ring was built from, members sorted by id.
  const RingConfig& config() const { return config_; }
  const std::vector<Member>& members() const { return config_.members; }
  bool zoned() const { return num_zones_ > 0; }
  int num_zones() const { return num_zones_; }
  // Largest n an owner list can have: the member count, or the zone count when zoned.
  int max_owners() const { return max_owners_; }
  // Owner-list length served from the segment table: min(cached_owners, max_owners()).
  int cached_owners() const { return cached_; }
  size_t num_vnodes() const { return point_pos_.size(); }
  size_t num_segments() const { return segment_start_.size(); }
  // Returns the heap bytes held by the lookup structures (vnodes, segments, index, members).
  size_t MemoryBytes() const;

 private:
  // Per-call scratch for Rank(): "seen" stamps per member and per zone.
  struct RankScratch {
    std::vector<uint32_t> member_stamp;
    std::vector<uint32_t> zone_stamp;
    uint32_t epoch = 0;
  };

  Ring() = default;

  void InitMembers();
  void PlaceVnodes();
  void BuildSegments();
  void BuildIndex();
  // Writes into out[0, n) the member indices of the first n owners of position x, walking the
  // vnodes from every probe in (distance, node id) order. `first_vnode[j]` is the first vnode
  // after x + probe offset j; null means find it by binary search. Returns how many owners it
  // wrote: n whenever n <= max_owners_.
  size_t Rank(uint64_t x, const size_t* first_vnode, size_t n, uint32_t* out,
              RankScratch* scratch) const;
  RankScratch NewScratch() const;
  // Returns the index of the segment containing `hash`.
  size_t SegmentOf(uint64_t hash) const {
    const size_t bucket = static_cast<size_t>(hash >> index_shift_);
    size_t i = index_[bucket];
    const size_t hi = index_[bucket + 1];
    while (i < hi && segment_start_[i + 1] <= hash) ++i;
    return i;
  }

  RingConfig config_;  // members sorted by id
  int num_zones_ = 0;  // 0: not zoned
  int max_owners_ = 0;
  int cached_ = 0;
  std::vector<NodeId> member_id_;      // id per member index (config_.members order)
  std::vector<uint32_t> member_zone_;  // zone index per member
  std::vector<uint64_t> probe_offset_;

  // Vnodes sorted by (position, node id); parallel arrays.
  std::vector<uint64_t> point_pos_;
  std::vector<uint32_t> point_member_;  // member index

  // Segment i covers [segment_start_[i], segment_start_[i + 1]) (the last one up to 2^64);
  // segment_start_[0] == 0. Its owner list is the member indices
  // segment_owners_[i * cached_, (i + 1) * cached_) (16 bits: at most 65,536 members).
  std::vector<uint64_t> segment_start_;
  std::vector<uint16_t> segment_owners_;
  // index_[t] = segment containing t << index_shift_; index_.back() = last segment. About two
  // segments per bucket, so SegmentOf() scans a couple of entries.
  std::vector<uint32_t> index_;
  int index_shift_ = 60;
};

// The result of a membership change: the new ring and what moved from the old one.
struct RingChange {
  Ring ring;
  std::vector<MovedRange> moved;
};

}  // namespace ringcache::ring

#endif  // RINGCACHE_RING_RING_H_
