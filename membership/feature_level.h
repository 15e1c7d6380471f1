// The cluster feature level in etcd (docs/upgrades.md, "Feature levels"): the level every node
// of the cluster agreed to write formats of, kept under membership::FeatureLevelKey and raised
// only by `ringcachectl cluster finalize`. Every daemon reads it before it joins a cluster: a
// release that does not support the cluster's level refuses to start, naming both levels,
// instead of misreading what the others write.
//
// Thread-safety: stateless functions; the client is used as its own contract allows.
#ifndef RINGCACHE_MEMBERSHIP_FEATURE_LEVEL_H_
#define RINGCACHE_MEMBERSHIP_FEATURE_LEVEL_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "membership/etcd_client.h"

namespace ringcache::membership {

// The cluster's feature level (absent: kBaseFeatureLevel) and the key's mod revision (0 when
// absent), for a compare-and-set. kDataLoss when the key holds something that is not a level.
// Every level read is noted as the one this process writes etcd values for (etcd_value.h).
absl::StatusOr<std::pair<uint32_t, int64_t>> ReadFeatureLevelKey(EtcdClient* client,
                                                                const std::string& prefix);
absl::StatusOr<uint32_t> ReadFeatureLevel(EtcdClient* client, const std::string& prefix);

// The feature level key's value for `level`: version 1's decimal below kEtcdValueFeatureLevel,
// an EtcdValue from it (the level that allows it is the first written in it).
std::string EncodeFeatureLevelValue(uint32_t level);

// OK when this release supports the cluster's feature level (common/formats.h, kFeatureLevel);
// kFailedPrecondition naming both otherwise: a node of an older release in a cluster finalized
// past it refuses to start. `who` names the daemon in the message ("cache node 3").
// It is a daemon's first etcd call: while etcd is unreachable (kUnavailable) it tries again
// every second for up to `wait`, then fails with the last error.
absl::Status CheckFeatureLevel(EtcdClient* client, const std::string& prefix,
                               const std::string& who, absl::Duration wait = absl::Seconds(30));

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_FEATURE_LEVEL_H_
