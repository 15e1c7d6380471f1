#include "coordinator/election.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringcache::coordinator {

using membership::DecodeNodeRecord;
using membership::EtcdCallOptions;
using membership::EtcdClient;
using membership::NodeRecord;
using membership::NodeRegistration;
using membership::TxnCompare;
using membership::TxnOp;

std::string CoordinatorKey(const std::string& prefix) {
  return absl::StrCat(prefix, "/coordinator");
}

std::string RestoreMarkKey(const std::string& prefix) {
  return absl::StrCat(prefix, "/cluster/restoring");
}

absl::StatusOr<std::optional<LeaderInfo>> ReadLeader(EtcdClient* client,
                                                     const std::string& prefix) {
  auto kv = client->Get(CoordinatorKey(prefix));
  if (!kv.ok()) return kv.status();
  if (!kv->has_value()) return std::optional<LeaderInfo>();
  auto record = DecodeNodeRecord((*kv)->value);
  if (!record.ok()) {
    return absl::DataLossError(
        absl::StrCat(CoordinatorKey(prefix), ": ", record.status().message()));
  }
  return std::optional<LeaderInfo>(LeaderInfo{*record, (*kv)->create_revision});
}

std::unique_ptr<Election> Election::Start(EtcdClient* client, NodeRegistration* registration,
                                          Options options, Callback callback) {
  std::unique_ptr<Election> e(
      new Election(client, registration, std::move(options), std::move(callback)));
  e->thread_ = std::thread([p = e.get()] { p->Run(); });
  return e;
}

Election::Election(EtcdClient* client, NodeRegistration* registration, Options options,
                   Callback callback)
    : client_(client),
      registration_(registration),
      options_(std::move(options)),
      callback_(std::move(callback)),
      key_(CoordinatorKey(options_.prefix)) {}

Election::~Election() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool Election::leader() const {
  absl::MutexLock l(&mu_);
  return term_ != 0 && registration_->LeaseValid();
}

int64_t Election::term() const {
  absl::MutexLock l(&mu_);
  return term_;
}

TxnCompare TermGuard(const std::string& prefix, int64_t term) {
  // -1 matches no key, existing or missing: a guarded write without a term fails.
  return TxnCompare::CreateRevisionIs(CoordinatorKey(prefix), term == 0 ? -1 : term);
}

TxnCompare Election::LeaderGuard() const { return TermGuard(options_.prefix, term()); }

int64_t Election::Look(bool leading) {
  const int64_t lease = registration_->lease_id();
  const absl::Duration left = registration_->ValidFor();
  const bool valid = left > absl::ZeroDuration();
  // A leader whose lease may have expired steps down now, without asking etcd (which may be
  // cut off): a successor can be elected as soon as the lease is gone at the server.
  if (leading && !valid) return 0;
  EtcdCallOptions call;
  call.timeout =
      leading ? std::clamp(left, absl::Milliseconds(50), absl::Seconds(2)) : absl::Seconds(2);
  auto kv = client_->Get(key_, call);
  if (!kv.ok()) return 0;  // etcd unreachable: not (certainly) leader
  if (kv->has_value()) {
    // Ours if it carries our lease (also after an outcome-unknown create).
    return (*kv)->lease == lease && lease != 0 && registration_->LeaseValid()
               ? (*kv)->create_revision
               : 0;
  }
  if (!valid || lease == 0) return 0;
  auto r =
      client_->Txn({TxnCompare::KeyMissing(key_),
                    TxnCompare::KeyMissing(RestoreMarkKey(options_.prefix))},
                   {TxnOp::Put(key_, membership::EncodeNodeValue(registration_->record()), lease)}, {}, call);
  if (!r.ok() || !r->succeeded) return 0;  // lost the race, or outcome unknown: look again
  return r->revision;
}

void Election::DeleteKey(int64_t term) {
  EtcdCallOptions call;
  call.timeout = absl::Seconds(2);
  (void)client_->Txn({TermGuard(options_.prefix, term)}, {TxnOp::Delete(key_)}, {}, call);
}

void Election::StepDown(int64_t term) {
  {
    absl::MutexLock l(&mu_);
    term_ = 0;
  }
  callback_(false, term);
}

void Election::Run() {
  int64_t term = 0;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), options_.poll)) break;
    }
    const int64_t now = Look(term != 0);
    if (now == term) continue;
    if (term != 0) {
      spdlog::warn("coordinator: no longer the leader (term {})", term);
      StepDown(term);
    }
    term = now;
    if (term != 0) {
      spdlog::info("coordinator: elected leader (term {}) as {}", term, key_);
      {
        absl::MutexLock l(&mu_);
        term_ = term;
      }
      if (!callback_(true, term)) {
        spdlog::error("coordinator: cannot lead; resigning term {} and not campaigning for {}",
                      term, absl::FormatDuration(options_.resign_backoff));
        StepDown(term);
        DeleteKey(term);
        term = 0;
        absl::MutexLock l(&mu_);
        auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
        if (mu_.AwaitWithTimeout(absl::Condition(&stop), options_.resign_backoff)) break;
      }
    }
  }
  if (term != 0) {
    StepDown(term);
    DeleteKey(term);  // hand over at once
  }
}

}  // namespace ringcache::coordinator
