// EtcdClient's Auth calls and the roles of ringcache's components (etcd_auth.h).
#include "membership/etcd_auth.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "membership/etcd_client_internal.h"
#include "membership/membership.h"

namespace ringcache::membership {

namespace pb = ::etcdserverpb;

namespace {

constexpr char kRootRole[] = "root";
constexpr char kRootUser[] = "root";

// etcd answers "role name already exists" / "user name already exists" (FAILED_PRECONDITION)
// to a second add: for Ensure* that is success.
bool AlreadyExists(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) && absl::StrContains(s.message(), "already exists");
}

::authpb::Permission_Type ToPb(EtcdGrant::Access access) {
  switch (access) {
    case EtcdGrant::Access::kRead:
      return ::authpb::Permission_Type_READ;
    case EtcdGrant::Access::kWrite:
      return ::authpb::Permission_Type_WRITE;
    case EtcdGrant::Access::kReadWrite:
      break;
  }
  return ::authpb::Permission_Type_READWRITE;
}

}  // namespace

absl::Status EtcdClient::EnsureRole(const std::string& role, const std::vector<EtcdGrant>& grants,
                                    const CallOptions& call) {
  pb::AuthRoleAddRequest add;
  add.set_name(role);
  pb::AuthRoleAddResponse added;
  absl::Status s = Call(absl::StrCat("etcd RoleAdd ", role), call, /*idempotent=*/true,
                        [&](Endpoint& ep, Attempt& a) {
                          return FromGrpc(ep.auth->RoleAdd(&a.ctx, add, &added), a.what);
                        });
  if (!s.ok() && !AlreadyExists(s)) return s;
  for (const EtcdGrant& g : grants) {
    pb::AuthRoleGrantPermissionRequest req;
    req.set_name(role);
    req.mutable_perm()->set_permtype(ToPb(g.access));
    req.mutable_perm()->set_key(g.prefix);
    req.mutable_perm()->set_range_end(PrefixRangeEnd(g.prefix));
    pb::AuthRoleGrantPermissionResponse resp;
    RC_RETURN_IF_ERROR(Call(absl::StrCat("etcd RoleGrantPermission ", role, " ", g.prefix), call,
                            /*idempotent=*/true, [&](Endpoint& ep, Attempt& a) {
                              return FromGrpc(ep.auth->RoleGrantPermission(&a.ctx, req, &resp),
                                              a.what);
                            }));
  }
  return absl::OkStatus();
}

absl::Status EtcdClient::EnsureUser(const std::string& name, const std::string& role,
                                    const CallOptions& call) {
  pb::AuthUserAddRequest add;
  add.set_name(name);
  add.mutable_options()->set_no_password(true);
  pb::AuthUserAddResponse added;
  absl::Status s = Call(absl::StrCat("etcd UserAdd ", name), call, /*idempotent=*/true,
                        [&](Endpoint& ep, Attempt& a) {
                          return FromGrpc(ep.auth->UserAdd(&a.ctx, add, &added), a.what);
                        });
  if (!s.ok() && !AlreadyExists(s)) return s;
  pb::AuthUserGrantRoleRequest grant;
  grant.set_user(name);
  grant.set_role(role);
  pb::AuthUserGrantRoleResponse granted;
  return Call(absl::StrCat("etcd UserGrantRole ", name, " ", role), call, /*idempotent=*/true,
              [&](Endpoint& ep, Attempt& a) {
                return FromGrpc(ep.auth->UserGrantRole(&a.ctx, grant, &granted), a.what);
              });
}

absl::Status EtcdClient::AuthEnable(const CallOptions& call) {
  pb::AuthEnableRequest req;
  pb::AuthEnableResponse resp;
  return Call("etcd AuthEnable", call, /*idempotent=*/true, [&](Endpoint& ep, Attempt& a) {
    return FromGrpc(ep.auth->AuthEnable(&a.ctx, req, &resp), a.what);
  });
}

absl::StatusOr<EtcdComponentRole> EtcdRoleOf(absl::string_view prefix,
                                             absl::string_view component) {
  if (component == tls::kRoleAdmin) return EtcdComponentRole{kRootRole, {}};
  absl::string_view name = prefix;
  while (absl::ConsumePrefix(&name, "/")) {
  }
  const std::string all = absl::StrCat(prefix, "/");
  EtcdComponentRole out;
  out.role = absl::StrCat(name, "-", component);
  if (component == tls::kRoleGateway) {
    out.grants.push_back(EtcdGrant{all, EtcdGrant::Access::kReadWrite});
  } else if (component == tls::kRoleCacheNode || component == tls::kRoleDataNode) {
    out.grants.push_back(EtcdGrant{all, EtcdGrant::Access::kRead});
    const Role node = component == tls::kRoleCacheNode ? Role::kCache : Role::kData;
    out.grants.push_back(EtcdGrant{RolePrefix(prefix, node), EtcdGrant::Access::kReadWrite});
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "no etcd role for '", component, "': ",
        absl::StrJoin({tls::kRoleGateway, tls::kRoleCacheNode, tls::kRoleDataNode,
                       tls::kRoleAdmin},
                      ", "),
        " have one (NBD clients get none: etcd refuses them everything)"));
  }
  return out;
}

absl::Status EnableEtcdAuth(EtcdClient& etcd, absl::string_view prefix,
                            const std::string& admin_user) {
  for (const char* component : {tls::kRoleGateway, tls::kRoleCacheNode, tls::kRoleDataNode}) {
    RC_ASSIGN_OR_RETURN(EtcdComponentRole r, EtcdRoleOf(prefix, component));
    RC_RETURN_IF_ERROR(etcd.EnsureRole(r.role, r.grants));
  }
  RC_RETURN_IF_ERROR(etcd.EnsureRole(kRootRole, {}));
  RC_RETURN_IF_ERROR(etcd.EnsureUser(kRootUser, kRootRole));
  if (admin_user != kRootUser) RC_RETURN_IF_ERROR(etcd.EnsureUser(admin_user, kRootRole));
  return etcd.AuthEnable();
}

absl::Status AddEtcdUser(EtcdClient& etcd, absl::string_view prefix, absl::string_view component,
                         const std::string& name) {
  RC_ASSIGN_OR_RETURN(EtcdComponentRole r, EtcdRoleOf(prefix, component));
  return etcd.EnsureUser(name, r.role);
}

}  // namespace ringcache::membership
