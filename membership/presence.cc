#include "membership/presence.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/status_macros.h"

namespace ringcache::membership {

absl::Status EtcdSettings::Validate() const {
  if (!enabled()) return absl::OkStatus();
  if (SplitEndpoints(endpoints).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("etcd_endpoints: no endpoint in '", endpoints,
                                                   "' (want host:port[,host:port...])"));
  }
  if (prefix.empty() || prefix[0] != '/' || prefix.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd_prefix: '", prefix, "' must start with / and not end with /"));
  }
  if (lease_ttl_s < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd_lease_ttl_s: ", lease_ttl_s, " is below the minimum of 2 s"));
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitEndpoints(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view e : absl::StrSplit(list, ',')) {
    e = absl::StripAsciiWhitespace(e);
    if (!e.empty()) out.emplace_back(e);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<EtcdClient>> ConnectEtcd(const EtcdSettings& settings) {
  RC_RETURN_IF_ERROR(settings.Validate());
  EtcdClient::Options options;
  options.endpoints = SplitEndpoints(settings.endpoints);
  return EtcdClient::Create(options);
}

absl::StatusOr<std::unique_ptr<Presence>> Presence::Start(
    const EtcdSettings& settings, NodeRecord record,
    NodeRegistration::ReregisteredCallback on_reregistered) {
  std::unique_ptr<Presence> p(new Presence());
  RC_ASSIGN_OR_RETURN(p->client_, ConnectEtcd(settings));
  NodeRegistration::Options options;
  options.prefix = settings.prefix;
  options.ttl = absl::Seconds(settings.lease_ttl_s);
  absl::StatusOr<std::unique_ptr<NodeRegistration>> reg = NodeRegistration::Start(
      p->client_.get(), Clock::Real(), options, std::move(record), std::move(on_reregistered));
  if (!reg.ok()) {
    return absl::Status(reg.status().code(),
                        absl::StrCat("cannot register in etcd at ", settings.endpoints, ": ",
                                     reg.status().message()));
  }
  p->registration_ = *std::move(reg);
  return p;
}

Presence::~Presence() { registration_.reset(); }

}  // namespace ringcache::membership
