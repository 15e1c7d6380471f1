// Ring construction, lookups and membership diffs (see ring.h for the placement scheme and its
// invariants). Pure; a built Ring is immutable and safe to share between threads.
#include "ring/ring.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringcache::ring {
namespace {

// Bounds that keep a ring's memory and build time reasonable (a 1,000-node ring at the defaults
// has 128k vnodes and about 1M segments, 18 MB).
constexpr int kMaxVnodesPerNode = 1 << 16;
constexpr int kMaxProbes = 16;
constexpr int kMaxCachedOwners = 16;
constexpr size_t kMaxTotalVnodes = size_t{1} << 21;
constexpr size_t kMaxSegmentCandidates = size_t{1} << 24;
constexpr size_t kMaxMembers = size_t{1} << 16;  // segment owners are 16-bit member indices

// Returns the vnode count of a member of `weight`; 0 when the weight is invalid or too small.
int64_t VnodeCount(double weight, int vnodes_per_node) {
  if (!std::isfinite(weight) || weight <= 0) return 0;
  const double v = weight * vnodes_per_node;
  if (v >= static_cast<double>(kMaxTotalVnodes) + 1) {
    return static_cast<int64_t>(kMaxTotalVnodes) + 1;  // "too many"; avoids llround overflow
  }
  return std::llround(v);
}

// A walk clockwise from y = x + probe offset over the sorted vnodes.
struct Cursor {
  uint64_t y = 0;
  uint64_t dist = 0;  // (vnode position - y - 1) mod 2^64: a vnode exactly at y is a full turn away
  size_t idx = 0;     // current vnode
  size_t steps = 0;   // vnodes already passed; the walk ends after a full turn
};

// Returns the index of the first vnode strictly after position y, wrapping to 0.
size_t FirstVnodeAfter(const std::vector<uint64_t>& points, uint64_t y) {
  const size_t i =
      static_cast<size_t>(std::upper_bound(points.begin(), points.end(), y) - points.begin());
  return i == points.size() ? 0 : i;
}

// Returns the cursor holding the (distance, member index)-smallest vnode among the k cursors that
// have not gone full circle over m vnodes, or -1 when all have.
int NextCursor(const Cursor* cursors, int k, size_t m, const std::vector<uint32_t>& point_member) {
  int best = -1;
  for (int j = 0; j < k; ++j) {
    const Cursor& c = cursors[j];
    if (c.steps == m) continue;
    if (best < 0) {
      best = j;
      continue;
    }
    const Cursor& b = cursors[best];
    if (c.dist < b.dist || (c.dist == b.dist && point_member[c.idx] < point_member[b.idx])) {
      best = j;
    }
  }
  return best;
}

// A position at which probe `probe` reaches vnode `vnode`: x = vnode position - probe offset.
struct Crossing {
  uint64_t x;
  uint32_t probe;
  uint32_t vnode;
};

// Returns every probe crossing, sorted clockwise. At one x, each probe's crossings stay in vnode
// order (ties of equal vnode positions), so applying them in order leaves the last one current.
std::vector<Crossing> ProbeCrossings(const std::vector<uint64_t>& points,
                                     const std::vector<uint64_t>& offsets) {
  std::vector<Crossing> crossings;
  crossings.reserve(points.size() * offsets.size());
  for (size_t j = 0; j < offsets.size(); ++j) {
    for (size_t i = 0; i < points.size(); ++i) {
      crossings.push_back(
          Crossing{points[i] - offsets[j], static_cast<uint32_t>(j), static_cast<uint32_t>(i)});
    }
  }
  std::sort(crossings.begin(), crossings.end(), [](const Crossing& a, const Crossing& b) {
    if (a.x != b.x) return a.x < b.x;
    return a.probe != b.probe ? a.probe < b.probe : a.vnode < b.vnode;
  });
  return crossings;
}

absl::Status OwnerCountError(int n, const Ring& ring) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("owner count must be >= 1, got ", n));
  if (ring.zoned()) {
    return absl::FailedPreconditionError(
        absl::StrCat("asked for ", n, " owners in distinct zones, but the ring has only ",
                     ring.num_zones(), " zones (", ring.members().size(), " nodes)"));
  }
  return absl::FailedPreconditionError(absl::StrCat("asked for ", n,
                                                    " distinct owners, but the ring has only ",
                                                    ring.members().size(), " nodes"));
}

}  // namespace

absl::Status RingConfig::Validate() const {
  if (vnodes_per_node < 1 || vnodes_per_node > kMaxVnodesPerNode) {
    return absl::InvalidArgumentError(absl::StrCat("vnodes_per_node must be in [1, ",
                                                   kMaxVnodesPerNode, "], got ", vnodes_per_node));
  }
  if (probes < 1 || probes > kMaxProbes) {
    return absl::InvalidArgumentError(
        absl::StrCat("probes must be in [1, ", kMaxProbes, "], got ", probes));
  }
  if (cached_owners < 1 || cached_owners > kMaxCachedOwners) {
    return absl::InvalidArgumentError(
        absl::StrCat("cached_owners must be in [1, ", kMaxCachedOwners, "], got ", cached_owners));
  }
  if (members.empty()) return absl::InvalidArgumentError("membership is empty");
  if (members.size() > kMaxMembers) {
    return absl::InvalidArgumentError(absl::StrCat("membership has ", members.size(),
                                                   " nodes; a ring holds at most ", kMaxMembers));
  }
  absl::flat_hash_map<NodeId, size_t> seen;
  size_t total_vnodes = 0;
  const bool zoned = !members[0].zone.empty();
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    auto [it, inserted] = seen.emplace(m.id, i);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate node id ", m.id, " (members ", it->second, " and ", i, ")"));
    }
    if (!std::isfinite(m.weight) || m.weight <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("member ", i, " (node ", m.id,
                                                     "): weight must be a positive finite number, "
                                                     "got ",
                                                     m.weight));
    }
    const int64_t vnodes = VnodeCount(m.weight, vnodes_per_node);
    if (vnodes < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("member ", i, " (node ", m.id, "): weight ", m.weight,
                       " gives no virtual node at vnodes_per_node=", vnodes_per_node));
    }
    total_vnodes += static_cast<size_t>(vnodes);
    if (total_vnodes > kMaxTotalVnodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("membership needs more than ", kMaxTotalVnodes, " virtual nodes (at member ",
                       i, ", node ", m.id, "); lower vnodes_per_node or the weights"));
    }
    if (m.zone.empty() == zoned) {
      const size_t with = zoned ? 0 : i;
      const size_t without = zoned ? i : 0;
      return absl::InvalidArgumentError(absl::StrCat(
          "member ", without, " (node ", members[without].id, ") has no zone but member ", with,
          " (node ", members[with].id, ") has zone \"", members[with].zone,
          "\": give every member a zone, or none"));
    }
  }
  if (total_vnodes * static_cast<size_t>(probes) > kMaxSegmentCandidates) {
    return absl::InvalidArgumentError(
        absl::StrCat("vnodes (", total_vnodes, ") x probes (", probes, ") exceeds ",
                     kMaxSegmentCandidates, "; lower vnodes_per_node, the weights or probes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Ring> Ring::BuildCacheRing(std::vector<Member> members) {
  RingConfig rc;
  rc.members = std::move(members);
  rc.cached_owners = 1;
  return Build(std::move(rc));
}

absl::StatusOr<Ring> Ring::Build(RingConfig config) {
  RC_RETURN_IF_ERROR(config.Validate());
  Ring ring;
  std::sort(config.members.begin(), config.members.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  ring.config_ = std::move(config);
  ring.InitMembers();
  ring.PlaceVnodes();
  ring.BuildSegments();
  ring.BuildIndex();
  return ring;
}

void Ring::InitMembers() {
  const auto& members = config_.members;
  member_id_.clear();
  for (const Member& m : members) member_id_.push_back(m.id);
  member_zone_.assign(members.size(), 0);
  num_zones_ = 0;
  if (!members[0].zone.empty()) {
    std::vector<std::string> zones;
    for (const Member& m : members) zones.push_back(m.zone);
    std::sort(zones.begin(), zones.end());
    zones.erase(std::unique(zones.begin(), zones.end()), zones.end());
    for (size_t i = 0; i < members.size(); ++i) {
      member_zone_[i] = static_cast<uint32_t>(
          std::lower_bound(zones.begin(), zones.end(), members[i].zone) - zones.begin());
    }
    num_zones_ = static_cast<int>(zones.size());
  }
  max_owners_ = zoned() ? num_zones_ : static_cast<int>(members.size());
  cached_ = std::min(config_.cached_owners, max_owners_);
  probe_offset_.clear();
  for (int j = 0; j < config_.probes; ++j) probe_offset_.push_back(ProbeOffset(j));
}

void Ring::PlaceVnodes() {
  struct Point {
    uint64_t pos;
    uint32_t member;
  };
  std::vector<Point> points;
  const auto& members = config_.members;
  for (size_t i = 0; i < members.size(); ++i) {
    const int64_t count = VnodeCount(members[i].weight, config_.vnodes_per_node);
    for (int64_t r = 0; r < count; ++r) {
      points.push_back(
          Point{HashVnode(members[i].id, static_cast<uint32_t>(r)), static_cast<uint32_t>(i)});
    }
  }
  // Members are sorted by id, so ordering ties (two vnodes at one position) by member index orders
  // them by node id, as the ranking does.
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return a.pos != b.pos ? a.pos < b.pos : a.member < b.member;
  });
  point_pos_.resize(points.size());
  point_member_.resize(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    point_pos_[i] = points[i].pos;
    point_member_[i] = points[i].member;
  }
}

Ring::RankScratch Ring::NewScratch() const {
  RankScratch scratch;
  scratch.member_stamp.assign(config_.members.size(), 0);
  scratch.zone_stamp.assign(static_cast<size_t>(num_zones_), 0);
  return scratch;
}

size_t Ring::Rank(uint64_t x, const size_t* first_vnode, size_t n, uint32_t* out,
                  RankScratch* scratch) const {
  const size_t m = point_pos_.size();
  const int k = config_.probes;
  Cursor cursors[kMaxProbes];
  for (int j = 0; j < k; ++j) {
    Cursor& c = cursors[j];
    c.y = x + probe_offset_[j];  // wraps mod 2^64 by design
    c.idx = first_vnode != nullptr ? first_vnode[j] : FirstVnodeAfter(point_pos_, c.y);
    c.dist = point_pos_[c.idx] - c.y - 1;
    c.steps = 0;
  }
  if (++scratch->epoch == 0) {  // stamps wrapped: forget them all
    std::fill(scratch->member_stamp.begin(), scratch->member_stamp.end(), 0);
    std::fill(scratch->zone_stamp.begin(), scratch->zone_stamp.end(), 0);
    scratch->epoch = 1;
  }
  const uint32_t epoch = scratch->epoch;
  const bool zoned = num_zones_ > 0;
  size_t got = 0;
  while (got < n) {
    // Pop the (distance, node id)-smallest vnode over all probes: a node's first appearance is its
    // score, so nodes come out in ranking order (member index order is node id order).
    const int best = NextCursor(cursors, k, m, point_member_);
    if (best < 0) break;  // every walk went full circle: all members seen
    Cursor& c = cursors[best];
    const uint32_t member = point_member_[c.idx];
    if (scratch->member_stamp[member] != epoch) {
      scratch->member_stamp[member] = epoch;
      const uint32_t zone = member_zone_[member];
      if (!zoned || scratch->zone_stamp[zone] != epoch) {
        if (zoned) scratch->zone_stamp[zone] = epoch;
        out[got++] = member;
      }
    }
    if (++c.steps < m) {
      if (++c.idx == m) c.idx = 0;
      c.dist = point_pos_[c.idx] - c.y - 1;
    }
  }
  return got;
}

void Ring::BuildSegments() {
  // The ranking changes only where a probe crosses a vnode. Sweep the crossings clockwise from 0,
  // keeping every probe's first vnode current, and rank once per distinct crossing position.
  const size_t m = point_pos_.size();
  const int k = config_.probes;
  const std::vector<Crossing> crossings = ProbeCrossings(point_pos_, probe_offset_);
  size_t first_vnode[kMaxProbes];
  for (int j = 0; j < k; ++j) first_vnode[j] = FirstVnodeAfter(point_pos_, probe_offset_[j]);

  RankScratch scratch = NewScratch();
  const size_t r = static_cast<size_t>(cached_);
  std::vector<uint32_t> owners(r);
  segment_start_.clear();
  segment_owners_.clear();
  auto add_segment = [&](uint64_t start) {
    Rank(start, first_vnode, r, owners.data(), &scratch);
    // Keep only starts where the cached owner list changes.
    if (!segment_start_.empty() &&
        std::equal(owners.begin(), owners.end(), segment_owners_.end() - r)) {
      return;
    }
    segment_start_.push_back(start);
    for (uint32_t o : owners) segment_owners_.push_back(static_cast<uint16_t>(o));
  };
  add_segment(0);
  size_t e = 0;
  while (e < crossings.size() && crossings[e].x == 0) ++e;  // already reflected in first_vnode
  while (e < crossings.size()) {
    const uint64_t x = crossings[e].x;
    for (; e < crossings.size() && crossings[e].x == x; ++e) {
      const size_t next = crossings[e].vnode + size_t{1};
      first_vnode[crossings[e].probe] = next == m ? 0 : next;
    }
    add_segment(x);
  }
  segment_start_.shrink_to_fit();
  segment_owners_.shrink_to_fit();
}

void Ring::BuildIndex() {
  const size_t n = segment_start_.size();
  const int bits = std::clamp(static_cast<int>(std::bit_width(n)) - 1, 4, 24);
  index_shift_ = 64 - bits;
  const size_t buckets = size_t{1} << bits;
  index_.assign(buckets + 1, 0);
  size_t i = 0;
  for (size_t t = 0; t < buckets; ++t) {
    const uint64_t lo = static_cast<uint64_t>(t) << index_shift_;
    while (i + 1 < n && segment_start_[i + 1] <= lo) ++i;
    index_[t] = static_cast<uint32_t>(i);
  }
  index_[buckets] = static_cast<uint32_t>(n - 1);
}

absl::Status Ring::FillOwners(uint64_t hash, absl::Span<NodeId> out) const {
  const size_t n = out.size();
  if (n < 1 || n > static_cast<size_t>(max_owners_)) {
    return OwnerCountError(static_cast<int>(std::min<size_t>(n, std::numeric_limits<int>::max())),
                           *this);
  }
  if (n <= static_cast<size_t>(cached_)) {
    const uint16_t* owners = &segment_owners_[SegmentOf(hash) * cached_];
    for (size_t i = 0; i < n; ++i) out[i] = member_id_[owners[i]];
    return absl::OkStatus();
  }
  RankScratch scratch = NewScratch();
  std::vector<uint32_t> owners(n);
  Rank(hash, nullptr, n, owners.data(), &scratch);
  for (size_t i = 0; i < n; ++i) out[i] = member_id_[owners[i]];
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NodeId>> Ring::OwnersOfHash(uint64_t hash, int n) const {
  if (n < 1 || n > max_owners_) return OwnerCountError(n, *this);
  std::vector<NodeId> owners(static_cast<size_t>(n));
  RC_RETURN_IF_ERROR(FillOwners(hash, absl::MakeSpan(owners)));
  return owners;
}

absl::StatusOr<RingChange> Ring::WithMembers(std::vector<Member> members) const {
  RingConfig next = config_;
  next.members = std::move(members);
  RC_ASSIGN_OR_RETURN(Ring ring, Build(std::move(next)));
  std::vector<MovedRange> moved = Diff(*this, ring);
  return RingChange{std::move(ring), std::move(moved)};
}

absl::StatusOr<RingChange> Ring::AddMember(Member member) const {
  for (const Member& m : config_.members) {
    if (m.id == member.id) {
      return absl::InvalidArgumentError(absl::StrCat("node ", member.id, " is already a member"));
    }
  }
  std::vector<Member> members = config_.members;
  members.push_back(std::move(member));
  return WithMembers(std::move(members));
}

absl::StatusOr<RingChange> Ring::RemoveMember(NodeId id) const {
  std::vector<Member> members;
  for (const Member& m : config_.members) {
    if (m.id != id) members.push_back(m);
  }
  if (members.size() == config_.members.size()) {
    return absl::NotFoundError(absl::StrCat("node ", id, " is not a member"));
  }
  if (members.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot remove node ", id, ", the last member"));
  }
  return WithMembers(std::move(members));
}

namespace {

// Calls fn(first, last, from_segment, to_segment) for every maximal run of the circle lying in a
// single segment of each ring, in clockwise order from 0. Both segment arrays start at 0.
template <typename Fn>
void ForEachOverlap(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, Fn fn) {
  constexpr uint64_t kEnd = std::numeric_limits<uint64_t>::max();
  size_t i = 0, j = 0;
  uint64_t first = 0;
  while (true) {
    const uint64_t a_last = i + 1 < a.size() ? a[i + 1] - 1 : kEnd;
    const uint64_t b_last = j + 1 < b.size() ? b[j + 1] - 1 : kEnd;
    const uint64_t last = std::min(a_last, b_last);
    fn(first, last, i, j);
    if (last == kEnd) return;
    first = last + 1;
    if (a_last == last) ++i;
    if (b_last == last) ++j;
  }
}

}  // namespace

std::vector<MovedRange> Ring::Diff(const Ring& from, const Ring& to) {
  std::vector<MovedRange> moved;
  ForEachOverlap(from.segment_start_, to.segment_start_,
                 [&](uint64_t first, uint64_t last, size_t i, size_t j) {
                   const NodeId old_owner = from.member_id_[from.segment_owners_[i * from.cached_]];
                   const NodeId new_owner = to.member_id_[to.segment_owners_[j * to.cached_]];
                   if (old_owner == new_owner) return;
                   if (!moved.empty() && moved.back().last + 1 == first &&
                       moved.back().old_owner == old_owner && moved.back().new_owner == new_owner) {
                     moved.back().last = last;
                     return;
                   }
                   moved.push_back(MovedRange{first, last, old_owner, new_owner});
                 });
  return moved;
}

absl::StatusOr<std::vector<ReplicaSetChange>> Ring::DiffReplicaSets(const Ring& from,
                                                                    const Ring& to, int n) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("owner count must be >= 1, got ", n));
  if (n > from.cached_ || n > to.cached_) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica-set diff of ", n, " owners needs both rings to cache at least ", n,
                     " owners per segment (they cache ", from.cached_, " and ", to.cached_,
                     "); raise RingConfig::cached_owners or check max_owners()"));
  }
  const size_t len = static_cast<size_t>(n);
  std::vector<ReplicaSetChange> changes;
  std::vector<NodeId> old_owners(len), new_owners(len);
  ForEachOverlap(from.segment_start_, to.segment_start_,
                 [&](uint64_t first, uint64_t last, size_t i, size_t j) {
                   for (size_t r = 0; r < len; ++r) {
                     old_owners[r] = from.member_id_[from.segment_owners_[i * from.cached_ + r]];
                     new_owners[r] = to.member_id_[to.segment_owners_[j * to.cached_ + r]];
                   }
                   if (old_owners == new_owners) return;
                   if (!changes.empty() && changes.back().last + 1 == first &&
                       changes.back().old_owners == old_owners &&
                       changes.back().new_owners == new_owners) {
                     changes.back().last = last;
                     return;
                   }
                   changes.push_back(ReplicaSetChange{first, last, old_owners, new_owners});
                 });
  return changes;
}

size_t Ring::MemoryBytes() const {
  size_t bytes =
      point_pos_.capacity() * sizeof(uint64_t) + point_member_.capacity() * sizeof(uint32_t) +
      segment_start_.capacity() * sizeof(uint64_t) + segment_owners_.capacity() * sizeof(uint16_t) +
      index_.capacity() * sizeof(uint32_t) + member_id_.capacity() * sizeof(NodeId) +
      member_zone_.capacity() * sizeof(uint32_t) + probe_offset_.capacity() * sizeof(uint64_t) +
      config_.members.capacity() * sizeof(Member);
  for (const Member& m : config_.members) {
    if (m.zone.capacity() > 15) bytes += m.zone.capacity() + 1;  // beyond the SSO buffer
  }
  return bytes;
}

}  // namespace ringcache::ring
