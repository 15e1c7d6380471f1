// Key layout and node records, NodeRegistration's renewal loop and fencing window, and
// MembershipWatcher's list-then-watch loop. See membership.h.
#include "membership/membership.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "membership/etcd_value.h"

namespace ringcache::membership {

// ---- Roles, keys ----

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kCache:
      return "cache";
    case Role::kData:
      return "data";
    case Role::kGateway:
      return "gateway";
  }
  return "unknown";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role r : {Role::kCache, Role::kData, Role::kGateway}) {
    if (name == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown node role '", name, "' (want cache, data or gateway)"));
}

std::string NodesPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "/nodes/"); }
std::string FeatureLevelKey(absl::string_view prefix) {
  return absl::StrCat(prefix, "/cluster/feature_level");
}
std::string RolePrefix(absl::string_view prefix, Role role) {
  return absl::StrCat(prefix, "/nodes/", RoleName(role), "/");
}
std::string NodeKey(absl::string_view prefix, Role role, uint32_t id) {
  return absl::StrCat(RolePrefix(prefix, role), id);
}
std::string VdisPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "/vdis/"); }
std::string VdiKey(absl::string_view prefix, absl::string_view name) {
  return absl::StrCat(prefix, "/vdis/", name);
}
std::string DrainingPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "/draining/"); }
std::string DrainingKey(absl::string_view prefix, uint32_t id) {
  return absl::StrCat(prefix, "/draining/", id);
}

absl::StatusOr<std::pair<Role, uint32_t>> ParseNodeKey(absl::string_view prefix,
                                                       absl::string_view key) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("node key '", key, "': ", why));
  };
  absl::string_view rest = key;
  const std::string nodes = NodesPrefix(prefix);
  if (!absl::ConsumePrefix(&rest, nodes)) return bad(absl::StrCat("not under ", nodes));
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) return bad("want <role>/<id>");
  RC_ASSIGN_OR_RETURN(const Role role, ParseRole(rest.substr(0, slash)));
  const absl::string_view id_text = rest.substr(slash + 1);
  uint32_t id = 0;
  if (id_text.empty() || !std::all_of(id_text.begin(), id_text.end(), ::isdigit) ||
      !absl::SimpleAtoi(id_text, &id)) {
    return bad("id is not a decimal uint32");
  }
  return std::make_pair(role, id);
}

// ---- Node records ----

absl::Status NodeRecord::Validate() const {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("node record ", RoleName(role), "/", id, ": ", what));
  };
  if (address.empty()) return bad("address is empty");
  if (!std::isfinite(weight) || weight <= 0) return bad(absl::StrCat("weight ", weight, " <= 0"));
  return absl::OkStatus();
}

namespace {

// Appends `s` as a JSON string literal.
void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace

std::string EncodeNodeRecord(const NodeRecord& r) {
  std::string out = "{\"role\":";
  AppendJsonString(&out, RoleName(r.role));
  absl::StrAppend(&out, ",\"id\":", r.id, ",\"address\":");
  AppendJsonString(&out, r.address);
  out.append(",\"http_address\":");
  AppendJsonString(&out, r.http_address);
  absl::StrAppend(&out, ",\"capacity_bytes\":", r.capacity_bytes);
  absl::StrAppendFormat(&out, ",\"weight\":%.17g", r.weight);
  out.append(",\"zone\":");
  AppendJsonString(&out, r.zone);
  if (!r.incarnation.empty()) {
    out.append(",\"incarnation\":");
    AppendJsonString(&out, r.incarnation);
  }
  if (!r.release.empty()) {
    out.append(",\"release\":");
    AppendJsonString(&out, r.release);
  }
  if (r.feature_level != 0) absl::StrAppend(&out, ",\"feature_level\":", r.feature_level);
  out.push_back('}');
  return out;
}

std::string EncodeNodeValue(const NodeRecord& r) {
  if (!WritesEtcdValues()) return EncodeNodeRecord(r);
  v1::EtcdValue v;
  v1::EtcdNode* n = v.mutable_node();
  n->set_role(std::string(RoleName(r.role)));
  n->set_id(r.id);
  n->set_address(r.address);
  n->set_http_address(r.http_address);
  n->set_capacity_bytes(r.capacity_bytes);
  n->set_weight(r.weight);
  n->set_zone(r.zone);
  n->set_incarnation(r.incarnation);
  n->set_release(r.release);
  n->set_feature_level(r.feature_level);
  return EncodeEtcdValue(std::move(v));
}

namespace {

absl::StatusOr<NodeRecord> DecodeNodeEtcdValue(absl::string_view value) {
  RC_ASSIGN_OR_RETURN(v1::EtcdValue v, DecodeEtcdValue(value, v1::EtcdValue::kNode,
                                                       "node record"));
  const v1::EtcdNode& n = v.node();
  NodeRecord r;
  RC_ASSIGN_OR_RETURN(r.role, ParseRole(n.role()));
  r.id = n.id();
  r.address = n.address();
  r.http_address = n.http_address();
  r.capacity_bytes = n.capacity_bytes();
  r.weight = n.weight();
  r.zone = n.zone();
  r.incarnation = n.incarnation();
  r.release = n.release();
  r.feature_level = n.feature_level();
  RC_RETURN_IF_ERROR(r.Validate());
  return r;
}

}  // namespace

absl::StatusOr<NodeRecord> DecodeNodeRecord(absl::string_view json) {
  if (IsEtcdValue(json)) return DecodeNodeEtcdValue(json);
  // JSON is a subset of YAML 1.2 flow style, so yaml-cpp (already a dependency) parses it.
  YAML::Node root;
  try {
    root = YAML::Load(std::string(json));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("node record: not JSON: ", e.msg));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("node record: not a JSON object");
  NodeRecord r;
  absl::Status error;
  auto scalar = [&](const char* field) -> std::optional<std::string> {
    const YAML::Node v = root[field];
    if (!v) return std::nullopt;
    if (!v.IsScalar()) {
      error.Update(absl::InvalidArgumentError(
          absl::StrCat("node record: field '", field, "' is not a scalar")));
      return std::nullopt;
    }
    return v.Scalar();
  };
  auto fail = [&](const char* field, const std::string& text) {
    error.Update(absl::InvalidArgumentError(
        absl::StrCat("node record: field '", field, "' has a bad value '", text, "'")));
  };
  const std::optional<std::string> role = scalar("role");
  if (!role) return absl::InvalidArgumentError("node record: no 'role'");
  RC_ASSIGN_OR_RETURN(r.role, ParseRole(*role));
  const std::optional<std::string> id = scalar("id");
  if (!id) return absl::InvalidArgumentError("node record: no 'id'");
  if (!absl::SimpleAtoi(*id, &r.id)) fail("id", *id);
  if (auto v = scalar("address")) r.address = *v;
  if (auto v = scalar("http_address")) r.http_address = *v;
  if (auto v = scalar("zone")) r.zone = *v;
  if (auto v = scalar("incarnation")) r.incarnation = *v;
  if (auto v = scalar("release")) r.release = *v;
  if (auto v = scalar("feature_level"); v && !absl::SimpleAtoi(*v, &r.feature_level)) {
    fail("feature_level", *v);
  }
  if (auto v = scalar("capacity_bytes"); v && !absl::SimpleAtoi(*v, &r.capacity_bytes)) {
    fail("capacity_bytes", *v);
  }
  if (auto v = scalar("weight"); v && !absl::SimpleAtod(*v, &r.weight)) fail("weight", *v);
  RC_RETURN_IF_ERROR(error);
  RC_RETURN_IF_ERROR(r.Validate());
  return r;
}

// ---- NodeRegistration ----

absl::Status NodeRegistration::Options::Validate() const {
  if (ttl < absl::Seconds(2) || ttl != absl::Seconds(absl::ToInt64Seconds(ttl))) {
    return absl::InvalidArgumentError(
        absl::StrCat("registration ttl ", absl::FormatDuration(ttl), ": want whole seconds >= 2"));
  }
  if (safety_margin < absl::ZeroDuration() || safety_margin >= ttl / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "registration safety_margin ", absl::FormatDuration(safety_margin), ": want [0, ttl/2)"));
  }
  if (retry_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("registration retry_interval must be positive");
  }
  if (start_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("registration start_timeout must not be negative");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NodeRegistration>> NodeRegistration::Start(
    EtcdClient* client, Clock* clock, Options options, NodeRecord record,
    ReregisteredCallback on_reregistered) {
  RC_RETURN_IF_ERROR(options.Validate());
  RC_RETURN_IF_ERROR(record.Validate());
  std::unique_ptr<NodeRegistration> reg(new NodeRegistration(
      client, clock, std::move(options), std::move(record), std::move(on_reregistered)));
  // Real time, like the etcd client's own deadlines: `clock` may be a simulated one.
  const absl::Time give_up = absl::Now() + reg->options_.start_timeout;
  absl::StatusOr<Registered> first = reg->Register();
  for (int attempt = 1; !first.ok(); ++attempt) {
    const bool unreachable = absl::IsUnavailable(first.status()) ||
                             absl::IsDeadlineExceeded(first.status());
    if (!unreachable || absl::Now() + reg->options_.retry_interval >= give_up) {
      return first.status();
    }
    spdlog::warn("registration as {}: attempt {} failed ({}); retrying for up to {} more",
                 reg->key_, attempt, std::string(first.status().message()),
                 absl::FormatDuration(give_up - absl::Now()));
    absl::SleepFor(reg->options_.retry_interval);
    first = reg->Register();
  }
  reg->OpenWindow(first->valid_until);
  reg->thread_ = std::thread([r = reg.get()] { r->Run(); });
  return reg;
}

NodeRegistration::NodeRegistration(EtcdClient* client, Clock* clock, Options options,
                                   NodeRecord record, ReregisteredCallback on_reregistered)
    : client_(client),
      clock_(clock),
      options_(std::move(options)),
      record_(std::move(record)),
      key_(NodeKey(options_.prefix, record_.role, record_.id)),
      value_(EncodeNodeValue(record_)),
      on_reregistered_(std::move(on_reregistered)) {}

NodeRegistration::~NodeRegistration() {
  StopThread();
  const int64_t lease = lease_id();
  if (lease != 0) {
    // Best effort: if etcd is unreachable the lease expires by itself within the TTL.
    client_->LeaseRevoke(lease, {options_.ttl / 3}).IgnoreError();
  }
}

void NodeRegistration::StopThread() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void NodeRegistration::StopKeepAliveForTest() {
  StopThread();
  absl::MutexLock l(&mu_);
  lease_id_ = 0;  // so that the destructor does not revoke
}

bool NodeRegistration::LeaseValid(absl::Time now) const {
  absl::MutexLock l(&mu_);
  return now < valid_until_;
}

bool NodeRegistration::LeaseValid() const { return LeaseValid(clock_->Now()); }

absl::Time NodeRegistration::ValidUntil() const {
  absl::MutexLock l(&mu_);
  return valid_until_;
}

absl::Duration NodeRegistration::ValidFor() const {
  return std::max(ValidUntil() - clock_->Now(), absl::ZeroDuration());
}

int64_t NodeRegistration::lease_id() const {
  absl::MutexLock l(&mu_);
  return lease_id_;
}

absl::StatusOr<NodeRegistration::Registered> NodeRegistration::Register() {
  const EtcdClient::CallOptions call{options_.ttl / 3};
  // Taken before the grant is sent: the server's TTL starts later than this.
  const absl::Time sent = clock_->Now();
  RC_ASSIGN_OR_RETURN(const int64_t lease,
                      client_->LeaseGrant(absl::ToInt64Seconds(options_.ttl), call));
  absl::StatusOr<int64_t> revision = client_->Put(key_, value_, lease, call);
  if (!revision.ok()) {
    client_->LeaseRevoke(lease, call).IgnoreError();
    return revision.status();
  }
  absl::MutexLock l(&mu_);
  lease_id_ = lease;
  // The requested TTL, not the granted one: etcd only ever raises it.
  return Registered{*revision, sent + options_.ttl - options_.safety_margin};
}

void NodeRegistration::OpenWindow(absl::Time valid_until) {
  absl::MutexLock l(&mu_);
  valid_until_ = std::max(valid_until_, valid_until);
}

NodeRegistration::Renewal NodeRegistration::RenewOnce() {
  const int64_t lease = lease_id();
  const absl::Time sent = clock_->Now();
  absl::StatusOr<int64_t> ttl = client_->LeaseKeepAliveOnce(lease, {options_.ttl / 3});
  absl::MutexLock l(&mu_);
  if (ttl.ok()) {
    valid_until_ = std::max(valid_until_, sent + absl::Seconds(*ttl) - options_.safety_margin);
    return Renewal::kRenewed;
  }
  if (absl::IsNotFound(ttl.status())) {
    valid_until_ = absl::InfinitePast();  // gone at the server: fenced now
    return Renewal::kLost;
  }
  return Renewal::kUnreachable;  // the window shrinks by itself as time passes
}

void NodeRegistration::Run() {
  const absl::Duration interval = options_.ttl / 3;
  absl::Duration wait = interval;
  bool lost = false;
  bool said_fenced = false;  // logged that the window closed without a renewal
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait);
      if (stopping_) return;
    }
    if (!lost) {
      const Renewal renewal = RenewOnce();
      if (renewal == Renewal::kUnreachable && !said_fenced && !LeaseValid()) {
        said_fenced = true;
        spdlog::warn("etcd lease {:x} of {}: not renewed within its TTL (etcd unreachable); it "
                     "may expire, so this node is fenced until a renewal succeeds",
                     lease_id(), key_);
      }
      if (renewal == Renewal::kRenewed && said_fenced) {
        said_fenced = false;
        spdlog::info("etcd lease {:x} of {}: renewed again; no longer fenced", lease_id(), key_);
      }
      if (renewal != Renewal::kLost) {
        wait = renewal == Renewal::kRenewed ? interval : options_.retry_interval;
        continue;
      }
      spdlog::warn("etcd lease {:x} of {}: expired at the server; registering again",
                   lease_id(), key_);
      lost = true;
    }
    absl::StatusOr<Registered> registered = Register();
    if (!registered.ok()) {
      wait = options_.retry_interval;
      continue;
    }
    lost = false;
    said_fenced = false;
    wait = interval;
    spdlog::info("{} registered again under etcd lease {:x}", key_, lease_id());
    // The callback runs before the window opens (see ReregisteredCallback): a cache node must be
    // quarantined before LeaseValid() can say yes, or its destager could write stale blocks home
    // in between.
    if (on_reregistered_) on_reregistered_(lease_id(), registered->revision);
    OpenWindow(registered->valid_until);
  }
}

// ---- MembershipWatcher ----

std::unique_ptr<MembershipWatcher> MembershipWatcher::Start(EtcdClient* client, Options options,
                                                            Callback callback) {
  std::unique_ptr<MembershipWatcher> w(
      new MembershipWatcher(client, std::move(options), std::move(callback)));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

MembershipWatcher::MembershipWatcher(EtcdClient* client, Options options, Callback callback)
    : client_(client),
      options_(std::move(options)),
      nodes_prefix_(NodesPrefix(options_.prefix)),
      callback_(std::move(callback)) {}

MembershipWatcher::~MembershipWatcher() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::optional<MemberView> MembershipWatcher::Current() const {
  absl::MutexLock l(&mu_);
  return current_;
}

int MembershipWatcher::lists() const {
  absl::MutexLock l(&mu_);
  return lists_;
}

MemberView MembershipWatcher::PublishLocked(int64_t revision) {
  MemberView view;
  view.revision = revision;
  for (const auto& [key, value] : keys_) {
    absl::StatusOr<std::pair<Role, uint32_t>> where = ParseNodeKey(options_.prefix, key);
    if (!where.ok()) {
      view.malformed.push_back(std::string(where.status().message()));
      continue;
    }
    absl::StatusOr<NodeRecord> record = DecodeNodeRecord(value);
    if (!record.ok()) {
      view.malformed.push_back(absl::StrCat(key, ": ", record.status().message()));
      continue;
    }
    if (record->role != where->first || record->id != where->second) {
      view.malformed.push_back(
          absl::StrCat(key, ": record says ", RoleName(record->role), "/", record->id));
      continue;
    }
    if (auto l = leases_.find(key); l != leases_.end()) view.leases[*where] = l->second;
    view.by_role[static_cast<int>(where->first)].push_back(*std::move(record));
  }
  for (auto& nodes : view.by_role) {
    std::sort(nodes.begin(), nodes.end(),
              [](const NodeRecord& a, const NodeRecord& b) { return a.id < b.id; });
  }
  current_ = view;
  return view;
}

void MembershipWatcher::OnEvents(const std::vector<Event>& events, int64_t revision) {
  MemberView view;
  {
    absl::MutexLock l(&mu_);
    for (const Event& e : events) {
      if (e.type == Event::Type::kPut) {
        keys_[e.kv.key] = e.kv.value;
        leases_[e.kv.key] = e.kv.lease;
      } else {
        keys_.erase(e.kv.key);
        leases_.erase(e.kv.key);
      }
    }
    view = PublishLocked(revision);
  }
  callback_(view);
}

void MembershipWatcher::Run() {
  auto stop_or_relist = [this]()
                            ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || relist_; };
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      relist_ = false;
    }
    absl::StatusOr<RangeResult> list = client_->GetPrefix(nodes_prefix_, {options_.list_timeout});
    if (!list.ok()) {
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.retry_interval);
      continue;
    }
    MemberView view;
    {
      absl::MutexLock l(&mu_);
      keys_.clear();
      leases_.clear();
      for (KeyValue& kv : list->kvs) {
        leases_[kv.key] = kv.lease;
        keys_[std::move(kv.key)] = std::move(kv.value);
      }
      ++lists_;
      view = PublishLocked(list->revision);
    }
    callback_(view);
    // The Watch resumes across reconnects by itself; only a compaction needs a new list.
    std::unique_ptr<Watch> watch = client_->WatchPrefix(
        nodes_prefix_, list->revision + 1,
        [this](const std::vector<Event>& events, int64_t revision) { OnEvents(events, revision); },
        [this](int64_t) {
          absl::MutexLock l(&mu_);
          relist_ = true;
        });
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(&stop_or_relist));
    }
    watch.reset();
  }
}

}  // namespace ringcache::membership
