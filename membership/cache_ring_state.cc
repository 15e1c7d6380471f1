#include "membership/cache_ring_state.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "membership/etcd_value.h"

namespace ringcache::membership {

std::string EncodeCacheRingState(const CacheRingState& s) {
  std::string out = absl::StrCat("# ringcache cache ring (written by the coordinator)\nepoch ",
                                 s.epoch, "\n");
  for (const auto& l : s.learned) {
    absl::StrAppend(&out, "learned ", l.id, " ", l.address, " ", l.weight, "\n");
  }
  for (uint32_t id : s.removed) absl::StrAppend(&out, "removed ", id, "\n");
  for (uint32_t id : s.removing) absl::StrAppend(&out, "removing ", id, "\n");
  if (s.joining != 0) absl::StrAppend(&out, "joining ", s.joining, "\n");
  for (const auto& w : s.weights) {
    absl::StrAppendFormat(&out, "weight %u %.17g %u\n", w.id, w.weight, w.capacity_bytes);
  }
  if (const auto& w = s.reweighting; w.id != 0) {
    absl::StrAppendFormat(&out, "reweighting %u %.17g %u\n", w.id, w.weight, w.capacity_bytes);
  }
  return out;
}

std::string EncodeCacheRingValue(const CacheRingState& s) {
  if (!WritesEtcdValues()) return EncodeCacheRingState(s);
  v1::EtcdValue v;
  v1::EtcdCacheRing* r = v.mutable_cache_ring();
  r->set_epoch(s.epoch);
  for (const auto& l : s.learned) {
    v1::EtcdCacheRing::Learned* p = r->add_learned();
    p->set_id(l.id);
    p->set_address(l.address);
    p->set_weight(l.weight);
  }
  for (uint32_t id : s.removed) r->add_removed(id);
  for (uint32_t id : s.removing) r->add_removing(id);
  r->set_joining(s.joining);
  auto put = [](const CacheRingState::Weight& w, v1::EtcdCacheRing::Weight* p) {
    p->set_id(w.id);
    p->set_weight(w.weight);
    p->set_capacity_bytes(w.capacity_bytes);
  };
  for (const auto& w : s.weights) put(w, r->add_weights());
  if (s.reweighting.id != 0) put(s.reweighting, r->mutable_reweighting());
  return EncodeEtcdValue(std::move(v));
}

namespace {

void SortState(CacheRingState* s) {
  std::sort(s->learned.begin(), s->learned.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(s->removed.begin(), s->removed.end());
  std::sort(s->removing.begin(), s->removing.end());
  std::sort(s->weights.begin(), s->weights.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
}

// A weight of the state: a node, a positive finite weight.
absl::Status CheckWeight(const CacheRingState::Weight& w) {
  if (w.id == 0 || !std::isfinite(w.weight) || w.weight <= 0) {
    return absl::DataLossError(absl::StrCat("cache ring state: node ", w.id, " has weight ",
                                            w.weight));
  }
  return absl::OkStatus();
}

absl::StatusOr<CacheRingState> DecodeCacheRingEtcdValue(absl::string_view value) {
  RC_ASSIGN_OR_RETURN(v1::EtcdValue v,
                      DecodeEtcdValue(value, v1::EtcdValue::kCacheRing, "cache ring state"));
  const v1::EtcdCacheRing& r = v.cache_ring();
  CacheRingState s;
  s.epoch = r.epoch();
  for (const auto& p : r.learned()) {
    if (p.weight() <= 0 || p.address().empty()) {
      return absl::DataLossError(absl::StrCat("cache ring state: learned node ", p.id(),
                                              " has no address or a weight <= 0"));
    }
    s.learned.push_back({p.id(), p.address(), p.weight()});
  }
  s.removed.assign(r.removed().begin(), r.removed().end());
  s.removing.assign(r.removing().begin(), r.removing().end());
  s.joining = r.joining();
  for (const auto& p : r.weights()) {
    s.weights.push_back({p.id(), p.weight(), p.capacity_bytes()});
    RC_RETURN_IF_ERROR(CheckWeight(s.weights.back()));
  }
  if (r.has_reweighting()) {
    const auto& p = r.reweighting();
    s.reweighting = {p.id(), p.weight(), p.capacity_bytes()};
    RC_RETURN_IF_ERROR(CheckWeight(s.reweighting));
  }
  for (const auto* ids : {&s.removed, &s.removing}) {
    if (std::find(ids->begin(), ids->end(), 0u) != ids->end()) {
      return absl::DataLossError("cache ring state: node id 0");
    }
  }
  SortState(&s);
  return s;
}

}  // namespace

absl::StatusOr<CacheRingState> DecodeCacheRingState(absl::string_view text) {
  if (IsEtcdValue(text)) return DecodeCacheRingEtcdValue(text);
  CacheRingState s;
  bool has_epoch = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto bad = [&] {
      return absl::DataLossError(absl::StrCat("cache ring state: bad line '", line, "'"));
    };
    uint32_t id = 0;
    if (f[0] == "epoch" && f.size() == 2) {
      if (!absl::SimpleAtoi(f[1], &s.epoch)) return bad();
      has_epoch = true;
    } else if (f[0] == "learned" && f.size() == 4) {
      CacheRingState::Learned l;
      if (!absl::SimpleAtoi(f[1], &l.id) || !absl::SimpleAtod(f[3], &l.weight) || l.weight <= 0) {
        return bad();
      }
      l.address = std::string(f[2]);
      s.learned.push_back(std::move(l));
    } else if ((f[0] == "removed" || f[0] == "removing" || f[0] == "joining") && f.size() == 2) {
      if (!absl::SimpleAtoi(f[1], &id) || id == 0) return bad();
      if (f[0] == "removed") s.removed.push_back(id);
      if (f[0] == "removing") s.removing.push_back(id);
      if (f[0] == "joining") s.joining = id;
    } else if ((f[0] == "weight" || f[0] == "reweighting") && f.size() == 4) {
      CacheRingState::Weight w;
      if (!absl::SimpleAtoi(f[1], &w.id) || !absl::SimpleAtod(f[2], &w.weight) ||
          !absl::SimpleAtoi(f[3], &w.capacity_bytes) || !CheckWeight(w).ok()) {
        return bad();
      }
      if (f[0] == "weight") {
        s.weights.push_back(w);
      } else {
        s.reweighting = w;
      }
    } else {
      return bad();
    }
  }
  if (!has_epoch) return absl::DataLossError("cache ring state: no epoch line");
  SortState(&s);
  return s;
}

std::string CacheRingKey(const std::string& prefix) { return prefix + "/rings/cache"; }
std::string DataRingKey(const std::string& prefix) { return prefix + "/rings/data"; }
std::string RingEpochsPrefix(const std::string& prefix) { return prefix + "/ring-epochs/"; }
std::string CacheRingEpochKey(const std::string& prefix) { return RingEpochsPrefix(prefix) + "cache"; }
std::string DataRingEpochKey(const std::string& prefix) { return RingEpochsPrefix(prefix) + "data"; }
std::string EncodeRingEpoch(uint64_t epoch) { return absl::StrCat(epoch, "\n"); }

absl::StatusOr<uint64_t> DecodeRingEpoch(absl::string_view text) {
  return DecodeNumberValue(text, "ring epoch");
}

std::vector<TxnOp> CacheRingPuts(const std::string& prefix, const CacheRingState& state) {
  return {TxnOp::Put(CacheRingKey(prefix), EncodeCacheRingValue(state)),
          TxnOp::Put(CacheRingEpochKey(prefix), EncodeNumberValue(state.epoch, true))};
}

absl::StatusOr<std::optional<CacheRingState>> LoadEtcdCacheRing(EtcdClient* client,
                                                                const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(std::optional<KeyValue> kv, client->Get(CacheRingKey(prefix)));
  if (!kv.has_value()) return std::optional<CacheRingState>();
  auto st = DecodeCacheRingState(kv->value);
  if (!st.ok()) {
    return EtcdReadError(CacheRingKey(prefix), st.status());
  }
  return std::optional<CacheRingState>(*std::move(st));
}

}  // namespace ringcache::membership
