// CacheRingState: the cache ring as the coordinator publishes it in etcd (P/rings/cache); every
// other gateway follows it (Router::FollowRingState) and every cache node raises its ring epoch
// to it (cachenode/ring_follower.h); membership/README.md "Control plane".
//
// The ring is the cache nodes a gateway knows (those of the cluster file plus `learned` ones,
// which carry their address) minus `removed`. While a change is under way the state also says
// which requests must wait: those for objects owned by a node in `removing` (its dirty data is
// being settled) and those for objects that move to `joining` (handoff). `epoch` grows with every
// published state and is the fencing token requests carry, so a gateway still routing on an older
// state is refused by any cache node the coordinator already moved on (cachenode/service.h).
//
// A node's ring weight is the one it registered with (its cluster-file entry, or `learned`)
// until a reweight (`ringcachectl node resize`: the weight follows the SSD tier's capacity) sets
// one in `weights`, with the capacity it stands for; `reweighting` is a reweight under way
// (requests for the objects that move wait, as for a join).
//
// Text form, one fact per line: "epoch N", "learned ID ADDRESS WEIGHT", "removed ID",
// "removing ID", "joining ID", "weight ID WEIGHT CAPACITY", "reweighting ID WEIGHT CAPACITY";
// lines starting with '#' are comments. Releases before 0.2 read neither weight line: a reweight
// needs cluster feature level 3 (every value in etcd a message only 0.2 and later read).
#ifndef RINGCACHE_MEMBERSHIP_CACHE_RING_STATE_H_
#define RINGCACHE_MEMBERSHIP_CACHE_RING_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "membership/etcd_client.h"

namespace ringcache::membership {

struct CacheRingState {
  struct Learned {
    uint32_t id = 0;
    std::string address;
    double weight = 1.0;
    bool operator==(const Learned&) const = default;
  };
  struct Weight {
    uint32_t id = 0;  // 0: none (`reweighting`)
    double weight = 0;
    uint64_t capacity_bytes = 0;  // the SSD tier's size the weight stands for
    bool operator==(const Weight&) const = default;
  };
  uint64_t epoch = 0;
  std::vector<Learned> learned;     // sorted by id
  std::vector<uint32_t> removed;    // sorted
  std::vector<uint32_t> removing;   // sorted
  uint32_t joining = 0;             // 0: none
  std::vector<Weight> weights;      // sorted by id: weights set by reweights
  Weight reweighting;               // id 0: none
  bool operator==(const CacheRingState&) const = default;
};

std::string EncodeCacheRingState(const CacheRingState& s);
// The state as this process writes it to etcd: the text above (etcd-value 1) or, once the
// cluster's feature level allows it, an EtcdValue (etcd_value.h).
std::string EncodeCacheRingValue(const CacheRingState& s);
// Either version. kDataLoss naming the line when the text does not parse (kFailedPrecondition
// for an EtcdValue of a newer version).
absl::StatusOr<CacheRingState> DecodeCacheRingState(absl::string_view text);

std::string CacheRingKey(const std::string& prefix);  // P/rings/cache
std::string DataRingKey(const std::string& prefix);   // P/rings/data (datanode::EncodeDataRing)
// The rings' epochs alone, "N\n", each written in the same transaction as its ring:
// P/ring-epochs/cache and P/ring-epochs/data. Cache nodes need only the cache ring's epoch and a
// newer data ring, so they watch these few bytes (cachenode/ring_follower.h) rather than every
// ring, and the bytes etcd delivers per change grow linearly with the cluster, not with its
// square (docs/benchmarks.md, "Control plane scale").
std::string RingEpochsPrefix(const std::string& prefix);  // P/ring-epochs/
std::string CacheRingEpochKey(const std::string& prefix);
std::string DataRingEpochKey(const std::string& prefix);
std::string EncodeRingEpoch(uint64_t epoch);  // version 1's text (EncodeNumberValue writes)
absl::StatusOr<uint64_t> DecodeRingEpoch(absl::string_view text);  // either version
// The writes that publish `state`: the ring and its epoch.
std::vector<TxnOp> CacheRingPuts(const std::string& prefix, const CacheRingState& state);
// The published cache ring (nullopt: none yet); kDataLoss naming the key when it does not parse.
absl::StatusOr<std::optional<CacheRingState>> LoadEtcdCacheRing(EtcdClient* client,
                                                                const std::string& prefix);

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_CACHE_RING_STATE_H_
