#include "coordinator/catalog.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "membership/etcd_value.h"

namespace ringcache::coordinator {
namespace {

// The file's line that keeps the next VDI id (a comment to readers that do not know it).
constexpr absl::string_view kNextIdLine = "# next_id ";

const char* ModeName(v1::CacheMode m) {
  switch (m) {
    case v1::WRITETHROUGH:
      return "writethrough";
    case v1::WRITEAROUND:
      return "writearound";
    case v1::PASSTHROUGH:
      return "passthrough";
    default:
      return "writeback";
  }
}

bool ParseMode(const std::string& s, v1::CacheMode* m) {
  if (s == "writeback")
    *m = v1::WRITEBACK;
  else if (s == "writethrough")
    *m = v1::WRITETHROUGH;
  else if (s == "writearound")
    *m = v1::WRITEAROUND;
  else if (s == "passthrough")
    *m = v1::PASSTHROUGH;
  else
    return false;
  return true;
}

}  // namespace

absl::Status ValidateVdiName(const std::string& name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError("VDI name must be 1 to 64 characters");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("VDI name '", name, "' may only contain letters, digits, '.', '_', '-'"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The limits of a record's `qos=` token, by their short names.
struct QosField {
  const char* name;
  uint64_t (v1::VdiQos::*get)() const;
  void (v1::VdiQos::*set)(uint64_t);
};
constexpr QosField kQosFields[] = {
    {"ri", &v1::VdiQos::read_iops, &v1::VdiQos::set_read_iops},
    {"wi", &v1::VdiQos::write_iops, &v1::VdiQos::set_write_iops},
    {"io", &v1::VdiQos::iops, &v1::VdiQos::set_iops},
    {"rb", &v1::VdiQos::read_bytes_per_s, &v1::VdiQos::set_read_bytes_per_s},
    {"wb", &v1::VdiQos::write_bytes_per_s, &v1::VdiQos::set_write_bytes_per_s},
    {"b", &v1::VdiQos::bytes_per_s, &v1::VdiQos::set_bytes_per_s},
    {"rsv", &v1::VdiQos::reserve_iops, &v1::VdiQos::set_reserve_iops},
    {"rsvb", &v1::VdiQos::reserve_bytes_per_s, &v1::VdiQos::set_reserve_bytes_per_s},
};

}  // namespace

bool QosLimited(const v1::VdiQos& q) {
  for (const QosField& f : kQosFields) {
    if ((q.*f.get)() != 0) return true;
  }
  return false;
}

std::string EncodeQos(const v1::VdiQos& q) {
  std::vector<std::string> parts;
  for (const QosField& f : kQosFields) {
    if (const uint64_t v = (q.*f.get)()) parts.push_back(absl::StrCat(f.name, ":", v));
  }
  if (!parts.empty() && q.burst_ms()) parts.push_back(absl::StrCat("burst:", q.burst_ms()));
  if (q.ssd_min_permille()) parts.push_back(absl::StrCat("smin:", q.ssd_min_permille()));
  if (q.ssd_max_permille()) parts.push_back(absl::StrCat("smax:", q.ssd_max_permille()));
  return absl::StrJoin(parts, ",");
}

bool QosShares(const v1::VdiQos& q) { return q.ssd_min_permille() || q.ssd_max_permille(); }

void ApplyShares(VdiRecord* r) {
  r->geometry.set_ssd_min_permille(r->qos.ssd_min_permille());
  r->geometry.set_ssd_max_permille(r->qos.ssd_max_permille());
}

bool DecodeQos(absl::string_view text, v1::VdiQos* q) {
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(part, ':');
    uint64_t v = 0;
    if (!absl::SimpleAtoi(kv.second, &v) || v == 0) return false;
    bool known = false;
    for (const QosField& f : kQosFields) {
      if (kv.first == f.name) {
        (q->*f.set)(v);
        known = true;
      }
    }
    if (kv.first == "burst" && v <= UINT32_MAX) {
      q->set_burst_ms(static_cast<uint32_t>(v));
      known = true;
    }
    if (kv.first == "smin" && v <= 1000) {
      q->set_ssd_min_permille(static_cast<uint32_t>(v));
      known = true;
    }
    if (kv.first == "smax" && v <= 1000) {
      q->set_ssd_max_permille(static_cast<uint32_t>(v));
      known = true;
    }
    if (!known) return false;
  }
  return true;
}

std::string EncodeVdiLine(const VdiRecord& r) {
  const auto& g = r.geometry;
  std::string line =
      absl::StrCat(g.vdi_id(), " ", g.name(), " ", g.size_bytes(), " ", g.object_size(), " ",
                   g.block_size(), " ", g.replication(), " ", ModeName(r.mode));
  // Access, only when not the default, so older catalogs and records read the same.
  if (r.read_only) line += " ro";
  if (!r.allowed_clients.empty()) {
    absl::StrAppend(&line, " allow=", absl::StrJoin(r.allowed_clients, ","));
  }
  if (!r.read_only_clients.empty()) {
    absl::StrAppend(&line, " allow_ro=", absl::StrJoin(r.read_only_clients, ","));
  }
  if (r.public_export) line += " public";
  if (!r.policy.empty()) absl::StrAppend(&line, " policy=", r.policy);
  if (std::string qos = EncodeQos(r.qos); !qos.empty()) absl::StrAppend(&line, " qos=", qos);
  return line;
}

absl::Status ValidateClientIdentity(const std::string& id) {
  const bool ok = !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '@' || c == ':';
  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("client identity '", id, "' is not 1-64 characters of [A-Za-z0-9._@:-]"));
}

absl::StatusOr<VdiRecord> DecodeVdiLine(const std::string& line) {
  std::istringstream ss(line);
  uint32_t id, object_size, block_size, replication;
  uint64_t size;
  std::string name, mode, extra;
  VdiRecord r;
  bool bad = !(ss >> id >> name >> size >> object_size >> block_size >> replication >> mode) ||
             !ParseMode(mode, &r.mode) || !ValidateVdiName(name).ok() || id == 0 ||
             block_size == 0 || object_size == 0 || object_size % block_size != 0;
  while (!bad && (ss >> extra)) {
    if (extra == "ro" && !r.read_only) {
      r.read_only = true;
    } else if (absl::StartsWith(extra, "allow=") && r.allowed_clients.empty()) {
      r.allowed_clients = absl::StrSplit(extra.substr(6), ',');
      for (const std::string& c : r.allowed_clients) bad = bad || !ValidateClientIdentity(c).ok();
    } else if (absl::StartsWith(extra, "allow_ro=") && r.read_only_clients.empty()) {
      r.read_only_clients = absl::StrSplit(extra.substr(9), ',');
      for (const std::string& c : r.read_only_clients) {
        bad = bad || !ValidateClientIdentity(c).ok();
      }
    } else if (extra == "public" && !r.public_export) {
      r.public_export = true;
    } else if (absl::StartsWith(extra, "policy=") && r.policy.empty() && extra.size() > 7) {
      r.policy = extra.substr(7);
    } else if (absl::StartsWith(extra, "qos=") && !r.qos.ByteSizeLong()) {
      bad = !DecodeQos(absl::string_view(extra).substr(4), &r.qos);
    } else {
      bad = true;
    }
  }
  if (bad) return absl::DataLossError(absl::StrCat("malformed catalog record \"", line, "\""));
  r.geometry.set_vdi_id(id);
  r.geometry.set_name(name);
  r.geometry.set_size_bytes(size);
  r.geometry.set_object_size(object_size);
  r.geometry.set_block_size(block_size);
  r.geometry.set_replication(replication);
  ApplyShares(&r);
  return r;
}

std::string EncodeVdiValue(const VdiRecord& r) {
  if (!membership::WritesEtcdValues()) return EncodeVdiLine(r);
  v1::EtcdValue v;
  v1::EtcdVdi* e = v.mutable_vdi();
  *e->mutable_geometry() = r.geometry;
  v1::CacheMode mode = v1::WRITEBACK;
  ParseMode(ModeName(r.mode), &mode);  // as the line says it: an unspecified mode is write-back
  e->set_mode(mode);
  e->set_policy(r.policy);
  e->set_read_only(r.read_only);
  for (const std::string& c : r.allowed_clients) e->add_allowed_clients(c);
  for (const std::string& c : r.read_only_clients) e->add_read_only_clients(c);
  e->set_public_export(r.public_export);
  if (QosLimited(r.qos) || QosShares(r.qos)) *e->mutable_qos() = r.qos;
  return membership::EncodeEtcdValue(std::move(v));
}

absl::StatusOr<VdiRecord> DecodeVdiValue(const std::string& value) {
  if (!membership::IsEtcdValue(value)) return DecodeVdiLine(value);
  RC_ASSIGN_OR_RETURN(v1::EtcdValue v,
                      membership::DecodeEtcdValue(value, v1::EtcdValue::kVdi, "catalog record"));
  const v1::EtcdVdi& e = v.vdi();
  VdiRecord r;
  r.geometry = e.geometry();
  r.mode = e.mode();
  r.policy = e.policy();
  r.read_only = e.read_only();
  r.allowed_clients.assign(e.allowed_clients().begin(), e.allowed_clients().end());
  r.read_only_clients.assign(e.read_only_clients().begin(), e.read_only_clients().end());
  r.public_export = e.public_export();
  r.qos = e.qos();
  const v1::VdiGeometry& g = r.geometry;
  bool bad = r.mode < v1::WRITEBACK || r.mode > v1::PASSTHROUGH ||
             !ValidateVdiName(g.name()).ok() || g.vdi_id() == 0 || g.block_size() == 0 ||
             g.object_size() == 0 || g.object_size() % g.block_size() != 0 ||
             r.policy.find_first_of(" \t\n") != std::string::npos;
  for (const auto* list : {&r.allowed_clients, &r.read_only_clients}) {
    for (const std::string& c : *list) bad = bad || !ValidateClientIdentity(c).ok();
  }
  // The limits obey the catalog line's rules: they read back the same from its `qos=` token.
  if (const std::string token = EncodeQos(r.qos); !token.empty()) {
    v1::VdiQos check;
    bad = bad || !DecodeQos(token, &check) ||
          check.SerializeAsString() != r.qos.SerializeAsString();
  }
  if (bad) {
    return absl::DataLossError(absl::StrCat("malformed catalog record for VDI '", g.name(),
                                            "' (id ", g.vdi_id(), ")"));
  }
  ApplyShares(&r);
  return r;
}

absl::StatusOr<std::unique_ptr<Catalog>> Catalog::Open(const std::string& path,
                                                       VdiDefaults defaults) {
  std::unique_ptr<Catalog> c(new Catalog(path, defaults));
  absl::StatusOr<std::string> text = ReadStateFile(path);
  if (absl::IsNotFound(text.status())) return c;  // empty catalog
  RC_RETURN_IF_ERROR(text.status());
  std::istringstream in(*text);
  std::string line;
  int lineno = 0;
  absl::MutexLock l(&c->mu_);
  while (std::getline(in, line)) {
    ++lineno;
    if (uint32_t n = 0; absl::StartsWith(line, kNextIdLine) &&
                        absl::SimpleAtoi(line.substr(kNextIdLine.size()), &n)) {
      c->next_id_ = std::max(c->next_id_, n);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    auto r = DecodeVdiLine(line);
    if (!r.ok()) {
      return absl::DataLossError(absl::StrCat(path, ":", lineno, ": malformed catalog line"));
    }
    c->next_id_ = std::max(c->next_id_, r->geometry.vdi_id() + 1);
    c->by_name_[r->geometry.name()] = *std::move(r);
  }
  return c;
}

absl::Status Catalog::AttachStore(CatalogStore* store) {
  RC_ASSIGN_OR_RETURN(CatalogStore::Contents remote, store->LoadAll());
  absl::MutexLock l(&mu_);
  // Ids given before (here or in the store) stay given either way.
  next_id_ = std::max(next_id_, remote.next_id);
  if (remote.records.empty()) {
    for (const auto& [name, r] : by_name_) RC_RETURN_IF_ERROR(store->Put(r, next_id_));
  } else {
    by_name_.clear();
    for (VdiRecord& r : remote.records) {
      next_id_ = std::max(next_id_, r.geometry.vdi_id() + 1);
      by_name_[r.geometry.name()] = std::move(r);
    }
    RC_RETURN_IF_ERROR(SaveFileLocked());
  }
  store_ = store;
  return absl::OkStatus();
}

absl::StatusOr<bool> Catalog::Reload() {
  // The store is read without the lock, so a local change (Create, Delete, Update: each writes
  // the store first) may land in between; this read would then be older than the catalog and
  // undo the change (seen: a coordinator's reload dropped a VDI it had just created). A load
  // counts only if no local change came during it; otherwise it is read again.
  constexpr int kAttempts = 10;
  for (int attempt = 1;; ++attempt) {
    CatalogStore* store;
    uint64_t generation;
    {
      absl::MutexLock l(&mu_);
      store = store_;
      generation = generation_;
    }
    if (store == nullptr) return false;
    RC_ASSIGN_OR_RETURN(CatalogStore::Contents remote, store->LoadAll());
    std::map<std::string, VdiRecord> next;
    uint32_t next_id = remote.next_id;
    for (VdiRecord& r : remote.records) {
      next_id = std::max(next_id, r.geometry.vdi_id() + 1);
      next[r.geometry.name()] = std::move(r);
    }
    absl::MutexLock l(&mu_);
    if (generation_ != generation) {
      if (attempt < kAttempts) continue;
      return absl::UnavailableError(absl::StrCat("the VDI catalog changed during each of ",
                                                 kAttempts, " reloads; try again"));
    }
    return ApplyLoadedLocked(std::move(next), next_id);
  }
}

absl::StatusOr<bool> Catalog::ApplyLoadedLocked(std::map<std::string, VdiRecord> next,
                                                uint32_t next_id) {
  next_id_ = std::max(next_id_, next_id);
  bool same = next.size() == by_name_.size();
  for (auto a = next.begin(), b = by_name_.begin(); same && a != next.end(); ++a, ++b) {
    same = a->first == b->first && EncodeVdiLine(a->second) == EncodeVdiLine(b->second);
  }
  if (same) return false;
  by_name_ = std::move(next);
  RC_RETURN_IF_ERROR(SaveFileLocked());
  return true;
}

absl::Status Catalog::SaveLocked(const std::string& name) {
  ++generation_;  // even if the store refuses: it may have taken the change
  if (store_ != nullptr) {
    auto it = by_name_.find(name);
    RC_RETURN_IF_ERROR(it == by_name_.end() ? store_->Remove(name)
                                            : store_->Put(it->second, next_id_));
  }
  return SaveFileLocked();
}

absl::Status Catalog::SaveFileLocked() const {
  std::ostringstream out;
  out << "# ringcache catalog v1: id name size_bytes object_size block_size replication mode\n";
  out << kNextIdLine << next_id_ << '\n';
  for (const auto& [name, r] : by_name_) out << EncodeVdiLine(r) << '\n';
  if (absl::Status st = WriteFileAtomically(path_, out.str()); !st.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot save catalog ", path_, ": ", st.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<VdiRecord> Catalog::Create(const std::string& name, uint64_t size_bytes,
                                          uint32_t object_size, uint32_t replication) {
  RC_RETURN_IF_ERROR(ValidateVdiName(name));
  if (size_bytes == 0 || size_bytes % 4096 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size ", size_bytes, " must be a positive multiple of 4096"));
  }
  if (object_size == 0) object_size = defaults_.object_size;
  if (replication == 0) replication = defaults_.replication;
  if (object_size % defaults_.block_size != 0 || object_size < defaults_.block_size ||
      object_size > (256u << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("object size ", object_size, " must be a multiple of the ",
                     defaults_.block_size, "-byte block, at most 256 MiB"));
  }
  absl::MutexLock l(&mu_);
  if (by_name_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("VDI '", name, "' already exists"));
  }
  if (next_id_ > kMaxVdiId) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no VDI id left to give (the highest is ", kMaxVdiId, ")"));
  }
  VdiRecord r;
  r.geometry.set_vdi_id(next_id_++);  // not given back if the save fails: ids are cheap
  r.geometry.set_name(name);
  r.geometry.set_size_bytes(size_bytes);
  r.geometry.set_object_size(object_size);
  r.geometry.set_block_size(defaults_.block_size);
  r.geometry.set_replication(replication);
  by_name_[name] = r;
  absl::Status s = SaveLocked(name);
  if (!s.ok()) {
    by_name_.erase(name);
    return s;
  }
  return r;
}

absl::Status Catalog::Delete(const std::string& name) {
  absl::MutexLock l(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return absl::NotFoundError(absl::StrCat("no VDI named '", name, "'"));
  VdiRecord saved = it->second;
  by_name_.erase(it);
  absl::Status s = SaveLocked(name);
  if (!s.ok()) by_name_[name] = saved;
  return s;
}

absl::StatusOr<VdiRecord> Catalog::Update(const std::string& name,
                                          const std::function<void(VdiRecord*)>& change) {
  absl::MutexLock l(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return absl::NotFoundError(absl::StrCat("no VDI named '", name, "'"));
  const VdiRecord old = it->second;
  change(&it->second);
  if (absl::Status s = SaveLocked(name); !s.ok()) {
    it->second = old;
    return s;
  }
  return it->second;
}

absl::StatusOr<VdiRecord> Catalog::Resize(const std::string& name, uint64_t size_bytes) {
  if (size_bytes == 0 || size_bytes % 4096 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size ", size_bytes, " must be a positive multiple of 4096"));
  }
  return Update(name, [&](VdiRecord* r) { r->geometry.set_size_bytes(size_bytes); });
}

absl::Status Catalog::SetMode(const std::string& name, v1::CacheMode mode) {
  return Update(name, [&](VdiRecord* r) { r->mode = mode; }).status();
}

absl::Status Catalog::SetPolicy(const std::string& name, const std::string& policy) {
  if (policy.find_first_of(" \t\n") != std::string::npos) {
    return absl::InvalidArgumentError("a policy spec in the catalog has no spaces");
  }
  return Update(name, [&](VdiRecord* r) { r->policy = policy; }).status();
}

absl::StatusOr<VdiRecord> Catalog::SetAccess(const std::string& name, AccessChange change) {
  if (change.allowed_clients) {
    for (const std::string& c : *change.allowed_clients) {
      RC_RETURN_IF_ERROR(ValidateClientIdentity(c));
    }
  }
  if (!change.allow.empty()) RC_RETURN_IF_ERROR(ValidateClientIdentity(change.allow));
  if (!change.deny.empty()) RC_RETURN_IF_ERROR(ValidateClientIdentity(change.deny));
  // The deny would empty the lists, which opens the VDI to every identity: refused unless the
  // request empties them on purpose (allowed_clients set to none, `--allow-any`).
  bool last = false;
  absl::StatusOr<VdiRecord> saved = Update(name, [&](VdiRecord* r) {
    VdiRecord next = *r;
    if (change.read_only) next.read_only = *change.read_only;
    if (change.public_export) next.public_export = *change.public_export;
    if (change.allowed_clients) {
      next.allowed_clients = *change.allowed_clients;
      next.read_only_clients.clear();
    }
    auto drop = [](std::vector<std::string>* list, const std::string& id) {
      std::erase(*list, id);
    };
    if (!change.allow.empty()) {
      drop(&next.allowed_clients, change.allow);
      drop(&next.read_only_clients, change.allow);
      (change.allow_read_only ? next.read_only_clients : next.allowed_clients)
          .push_back(change.allow);
    }
    if (!change.deny.empty()) {
      drop(&next.allowed_clients, change.deny);
      drop(&next.read_only_clients, change.deny);
    }
    // One entry per identity; one on both lists is read-only.
    auto dedupe = [](std::vector<std::string>* list) {
      std::vector<std::string> seen;
      for (std::string& id : *list) {
        if (!absl::c_linear_search(seen, id)) seen.push_back(std::move(id));
      }
      *list = std::move(seen);
    };
    dedupe(&next.allowed_clients);
    dedupe(&next.read_only_clients);
    for (const std::string& id : next.read_only_clients) drop(&next.allowed_clients, id);
    const bool had = !r->allowed_clients.empty() || !r->read_only_clients.empty();
    const bool has = !next.allowed_clients.empty() || !next.read_only_clients.empty();
    const bool emptied_on_purpose = change.allowed_clients && change.allowed_clients->empty();
    if (had && !has && !emptied_on_purpose) {
      last = true;
      return;
    }
    *r = std::move(next);
  });
  if (saved.ok() && last) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", change.deny, "' is the last identity allowed to open VDI '", name,
        "': without it any client with a certificate could; allow another one first, or give "
        "`vdi access ", name, " --allow-any` if that is what you want"));
  }
  return saved;
}

absl::StatusOr<VdiRecord> Catalog::SetQos(const std::string& name, const v1::VdiQos& qos) {
  v1::VdiQos q = qos;
  if (!QosLimited(q)) {  // no limit: no burst either (the shares stay)
    const uint32_t min = q.ssd_min_permille(), max = q.ssd_max_permille();
    q.Clear();
    q.set_ssd_min_permille(min);
    q.set_ssd_max_permille(max);
  }
  return Update(name, [&](VdiRecord* r) {
    r->qos = q;
    ApplyShares(r);
  });
}

absl::StatusOr<VdiRecord> Catalog::Find(const std::string& name) const {
  absl::MutexLock l(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return absl::NotFoundError(absl::StrCat("no VDI named '", name, "'"));
  return it->second;
}

std::vector<VdiRecord> Catalog::List() const {
  absl::MutexLock l(&mu_);
  std::vector<VdiRecord> out;
  for (const auto& [n, r] : by_name_) out.push_back(r);
  return out;
}

}  // namespace ringcache::coordinator
