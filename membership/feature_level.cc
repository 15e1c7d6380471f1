#include "membership/feature_level.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/formats.h"
#include "common/status_macros.h"
#include "membership/etcd_value.h"
#include "membership/membership.h"

namespace ringcache::membership {

absl::StatusOr<std::pair<uint32_t, int64_t>> ReadFeatureLevelKey(EtcdClient* client,
                                                                const std::string& prefix) {
  EtcdCallOptions call;
  call.timeout = absl::Seconds(2);
  RC_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, client->Get(FeatureLevelKey(prefix), call));
  if (!kv) {
    NoteClusterFeatureLevel(kBaseFeatureLevel);
    return std::make_pair(kBaseFeatureLevel, int64_t{0});
  }
  absl::StatusOr<uint64_t> level = DecodeNumberValue(kv->value, FeatureLevelKey(prefix));
  if (!level.ok() || *level < kBaseFeatureLevel || *level > UINT32_MAX) {
    return absl::DataLossError(absl::StrCat("cluster feature level in etcd is not a level: ",
                                            level.ok() ? absl::StrCat(*level)
                                                       : level.status().message()));
  }
  NoteClusterFeatureLevel(static_cast<uint32_t>(*level));
  return std::make_pair(static_cast<uint32_t>(*level), kv->mod_revision);
}

std::string EncodeFeatureLevelValue(uint32_t level) {
  return EncodeNumberValueAs(level, level >= kEtcdValueFeatureLevel);
}

absl::StatusOr<uint32_t> ReadFeatureLevel(EtcdClient* client, const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(auto level, ReadFeatureLevelKey(client, prefix));
  return level.first;
}

absl::Status CheckFeatureLevel(EtcdClient* client, const std::string& prefix,
                               const std::string& who, absl::Duration wait) {
  // The first etcd call of a daemon's start: etcd (or the network to it, a container's DNS)
  // may not answer yet, so an unreachable etcd is waited for rather than fatal.
  const absl::Time deadline = absl::Now() + wait;
  absl::StatusOr<uint32_t> read = ReadFeatureLevel(client, prefix);
  auto unreachable = [](const absl::Status& st) {
    return absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st);
  };
  for (bool logged = false; !read.ok() && unreachable(read.status()) && absl::Now() < deadline;
       logged = true) {
    if (!logged) {
      spdlog::warn("{}: etcd does not answer yet ({}); waiting up to {} for it", who,
                   std::string(read.status().message()), absl::FormatDuration(wait));
    }
    absl::SleepFor(std::min(absl::Seconds(1), std::max(deadline - absl::Now(),
                                                       absl::ZeroDuration())));
    read = ReadFeatureLevel(client, prefix);
  }
  RC_ASSIGN_OR_RETURN(uint32_t level, read);
  if (level <= kFeatureLevel) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      who, ": the cluster runs at feature level ", level, " (etcd ", FeatureLevelKey(prefix),
      "); this release supports levels up to ", kFeatureLevel,
      " and could not read what the cluster writes: run a release that supports level ", level,
      " (docs/upgrades.md)"));
}

}  // namespace ringcache::membership
