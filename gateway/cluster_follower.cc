#include "gateway/cluster_follower.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "membership/membership.h"

namespace ringcache::gateway {

absl::StatusOr<std::unique_ptr<ClusterFollower>> ClusterFollower::Start(
    membership::EtcdClient* client, Router* router, Catalog* catalog, Options options,
    std::function<bool()> leading) {
  std::unique_ptr<ClusterFollower> f(
      new ClusterFollower(client, router, catalog, std::move(options), std::move(leading)));
  RC_RETURN_IF_ERROR(f->SyncOnce());
  f->loop_ = std::make_unique<WakeLoop>(f->options_.resync, [p = f.get()] {
    if (absl::Status s = p->SyncOnce(); !s.ok()) {
      spdlog::warn("following the coordinator: {}", s.ToString());
    }
  });
  auto wake = [p = f.get()](const std::vector<membership::Event>&, int64_t) { p->loop_->Wake(); };
  f->ring_watch_ = client->WatchPrefix(CacheRingKey(f->options_.prefix), 0, wake, nullptr);
  f->vdis_watch_ =
      client->WatchPrefix(membership::VdisPrefix(f->options_.prefix), 0, wake, nullptr);
  return f;
}

ClusterFollower::ClusterFollower(membership::EtcdClient* client, Router* router, Catalog* catalog,
                                 Options options, std::function<bool()> leading)
    : client_(client),
      router_(router),
      catalog_(catalog),
      options_(std::move(options)),
      leading_(std::move(leading)) {}

ClusterFollower::~ClusterFollower() {
  ring_watch_.reset();  // first: they wake the loop
  vdis_watch_.reset();
  loop_.reset();
}

absl::Status ClusterFollower::SyncOnce() {
  if (leading_ && leading_()) return absl::OkStatus();
  RC_ASSIGN_OR_RETURN(bool changed, catalog_->Reload());
  if (changed) spdlog::info("VDI catalog followed from etcd: {} VDIs", catalog_->List().size());
  RC_ASSIGN_OR_RETURN(std::optional<CacheRingState> st,
                      LoadEtcdCacheRing(client_, options_.prefix));
  if (!st.has_value() || (leading_ && leading_())) return absl::OkStatus();
  const uint64_t before = router_->ring_epoch();
  RC_RETURN_IF_ERROR(router_->FollowRingState(*st));
  if (router_->ring_epoch() != before) {
    spdlog::info("cache ring epoch {} followed from the coordinator ({} removed, {} removing{})",
                 st->epoch, st->removed.size(), st->removing.size(),
                 st->joining != 0 ? absl::StrCat(", node ", st->joining, " joining") : "");
  }
  return absl::OkStatus();
}

}  // namespace ringcache::gateway
