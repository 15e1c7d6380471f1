// EtcdClient: unary calls with failover (Call), the request/response conversions, and the watch
// thread (RunWatch). See etcd_client.h for the retry rules and the thread-safety contract.
#include "membership/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/grpc_tls.h"
#include "common/status_macros.h"
#include "membership/etcd_client_internal.h"

namespace ringcache::membership {

namespace pb = ::etcdserverpb;

// The state a Watch shares with its thread. Fields without a guard are set before the thread
// starts and then only read.
struct Watch::State {
  std::string prefix;
  EtcdClient::EventsCallback on_events;
  EtcdClient::CompactedCallback on_compacted;

  mutable absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool compacted ABSL_GUARDED_BY(mu) = false;
  int64_t next_revision ABSL_GUARDED_BY(mu) = 0;
  // The context of the stream in flight, so that the destructor can cancel it.
  grpc::ClientContext* ctx ABSL_GUARDED_BY(mu) = nullptr;
  std::thread thread;

  // Registers `context` as the one to cancel on stop and returns the revision to start from;
  // nullopt if the watch is stopping.
  std::optional<int64_t> Enter(grpc::ClientContext* context);
  // Unregisters the context.
  void Leave();
};

namespace {

bool Retryable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

// With authentication on, etcd checks a request's permissions against the auth store's revision
// of the moment and refuses it unapplied ("revision of auth store is old") when a user or role
// changed before it was applied. Any request may be sent again: nothing of it happened.
bool AuthStoreMoved(const absl::Status& s) {
  return absl::IsInvalidArgument(s) && absl::StrContains(s.message(), "auth store is old");
}

std::string StripScheme(absl::string_view endpoint) {
  for (absl::string_view scheme : {"http://", "https://"}) {
    if (absl::StartsWith(endpoint, scheme)) endpoint.remove_prefix(scheme.size());
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
  return std::string(endpoint);
}

// Channel settings: fast reconnects (gRPC's default backoff grows to two minutes, far longer than
// an etcd restart) and keepalive pings so that a hung peer is noticed on idle watch streams.
// etcd rejects pings more often than every 5 s (--grpc-keepalive-min-time), hence 10 s.
// With a TLS identity (--tls-dir) etcd is spoken to over TLS with the daemon's certificate.
std::shared_ptr<grpc::Channel> EtcdChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  SetReconnectArgs(&args);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  return grpc::CreateCustomChannel(target, tls::EtcdChannelCredentials(), args);
}

KeyValue FromPb(const ::mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

void ToPb(const TxnCompare& c, pb::Compare* out) {
  out->set_key(c.key);
  out->set_result(pb::Compare::EQUAL);
  switch (c.target) {
    case TxnCompare::Target::kCreateRevision:
      out->set_target(pb::Compare::CREATE);
      out->set_create_revision(c.revision);
      break;
    case TxnCompare::Target::kModRevision:
      out->set_target(pb::Compare::MOD);
      out->set_mod_revision(c.revision);
      break;
    case TxnCompare::Target::kValue:
      out->set_target(pb::Compare::VALUE);
      out->set_value(c.value);
      break;
  }
}

void ToPb(const TxnOp& op, pb::RequestOp* out) {
  switch (op.type) {
    case TxnOp::Type::kPut: {
      auto* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case TxnOp::Type::kDelete:
      out->mutable_request_delete_range()->set_key(op.key);
      break;
    case TxnOp::Type::kDeletePrefix: {
      auto* del = out->mutable_request_delete_range();
      del->set_key(op.key);
      del->set_range_end(EtcdClient::PrefixRangeEnd(op.key));
      break;
    }
  }
}

}  // namespace

// ---- Small value types ----

TxnCompare TxnCompare::KeyMissing(std::string key) { return CreateRevisionIs(std::move(key), 0); }
TxnCompare TxnCompare::CreateRevisionIs(std::string key, int64_t revision) {
  return TxnCompare{std::move(key), Target::kCreateRevision, revision, {}};
}
TxnCompare TxnCompare::ModRevisionIs(std::string key, int64_t revision) {
  return TxnCompare{std::move(key), Target::kModRevision, revision, {}};
}
TxnCompare TxnCompare::ValueIs(std::string key, std::string value) {
  return TxnCompare{std::move(key), Target::kValue, 0, std::move(value)};
}
TxnOp TxnOp::Put(std::string key, std::string value, int64_t lease) {
  return TxnOp{Type::kPut, std::move(key), std::move(value), lease};
}
TxnOp TxnOp::Delete(std::string key) { return TxnOp{Type::kDelete, std::move(key), {}, 0}; }
TxnOp TxnOp::DeletePrefix(std::string prefix) {
  return TxnOp{Type::kDeletePrefix, std::move(prefix), {}, 0};
}

absl::Status EtcdClient::Options::Validate() const {
  if (endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoints");
  for (const std::string& e : endpoints) {
    if (absl::StartsWith(e, "https://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", e, "': TLS is not supported; use http://"));
    }
    const std::string target = StripScheme(e);
    if (target.empty() || target.find(':') == std::string::npos ||
        target.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", e, "': want host:port or http://host:port"));
    }
  }
  if (dial_timeout <= absl::ZeroDuration() || rpc_timeout <= absl::ZeroDuration() ||
      call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd: dial, rpc and call timeouts must be positive");
  }
  if (backoff_min <= absl::ZeroDuration() || backoff_max < backoff_min) {
    return absl::InvalidArgumentError("etcd: want 0 < backoff_min <= backoff_max");
  }
  return absl::OkStatus();
}

std::string EtcdClient::PrefixRangeEnd(absl::string_view prefix) {
  std::string end(prefix);
  // Increment the last byte that is not 0xff, dropping the 0xff bytes after it.
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // no upper bound: every key >= prefix
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(Options options) {
  RC_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(options)));
}

EtcdClient::EtcdClient(Options options) : options_(std::move(options)) {
  for (const std::string& e : options_.endpoints) {
    auto ep = std::make_unique<Endpoint>();
    ep->target = StripScheme(e);
    ep->channel = EtcdChannel(ep->target);
    ep->kv = pb::KV::NewStub(ep->channel);
    ep->lease = pb::Lease::NewStub(ep->channel);
    ep->watch = pb::Watch::NewStub(ep->channel);
    ep->auth = pb::Auth::NewStub(ep->channel);
    ep->maintenance = pb::Maintenance::NewStub(ep->channel);
    endpoints_.push_back(std::move(ep));
  }
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::RotateFrom(size_t failed) {
  size_t expected = failed;
  current_.compare_exchange_strong(expected, (failed + 1) % endpoints_.size(),
                                   std::memory_order_relaxed);
}

absl::Status EtcdClient::Call(absl::string_view what, const CallOptions& call, bool idempotent,
                              const std::function<absl::Status(Endpoint&, Attempt&)>& rpc) {
  const absl::Duration timeout =
      call.timeout > absl::ZeroDuration() ? call.timeout : options_.call_timeout;
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = options_.backoff_min;
  absl::Status last;
  for (;;) {
    const size_t index = current_endpoint();
    Endpoint& ep = *endpoints_[index];
    const absl::Time now = absl::Now();
    // Phase 1: a connection. Nothing has been sent if this fails, so any call may be retried.
    const absl::Time connect_by = std::min(deadline, now + options_.dial_timeout);
    if (!ep.channel->WaitForConnected(absl::ToChronoTime(connect_by))) {
      last = absl::UnavailableError(absl::StrCat(what, " at ", ep.target, ": not connected after ",
                                                 absl::FormatDuration(connect_by - now)));
    } else {
      // Phase 2: the RPC. The request may have reached the server once this fails.
      Attempt attempt;
      attempt.what = absl::StrCat(what, " at ", ep.target);
      attempt.ctx.set_deadline(
          absl::ToChronoTime(std::min(deadline, absl::Now() + options_.rpc_timeout)));
      last = rpc(ep, attempt);
      if (last.ok() || (!Retryable(last) && !AuthStoreMoved(last))) return last;
      if (!idempotent && !AuthStoreMoved(last)) {
        return absl::UnavailableError(
            absl::StrCat(last.message(), " (outcome unknown: the request may have been applied)"));
      }
    }
    RotateFrom(index);
    const absl::Duration left = deadline - absl::Now();
    // Sleeping through to the deadline leaves no time for another attempt either.
    if (left <= backoff) {
      absl::SleepFor(std::max(left, absl::ZeroDuration()));
      return absl::UnavailableError(absl::StrCat(what, ": etcd unreachable for ",
                                                 absl::FormatDuration(timeout),
                                                 "; last error: ", last.message()));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

// ---- KV ----

absl::StatusOr<int64_t> EtcdClient::Put(absl::string_view key, absl::string_view value,
                                        int64_t lease_id, const CallOptions& call) {
  pb::PutRequest req;
  req.set_key(std::string(key));
  req.set_value(std::string(value));
  req.set_lease(lease_id);
  pb::PutResponse resp;
  RC_RETURN_IF_ERROR(Call(
      absl::StrCat("etcd Put ", key), call, /*idempotent=*/true,
      [&](Endpoint& ep, Attempt& a) { return FromGrpc(ep.kv->Put(&a.ctx, req, &resp), a.what); }));
  return resp.header().revision();
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Get(absl::string_view key,
                                                        const CallOptions& call) {
  pb::RangeRequest req;
  req.set_key(std::string(key));
  pb::RangeResponse resp;
  RC_RETURN_IF_ERROR(Call(absl::StrCat("etcd Get ", key), call, /*idempotent=*/true,
                          [&](Endpoint& ep, Attempt& a) {
                            return FromGrpc(ep.kv->Range(&a.ctx, req, &resp), a.what);
                          }));
  if (resp.kvs_size() == 0) return std::optional<KeyValue>();
  return std::optional<KeyValue>(FromPb(resp.kvs(0)));
}

absl::StatusOr<RangeResult> EtcdClient::GetPrefix(absl::string_view prefix,
                                                  const CallOptions& call) {
  pb::RangeRequest req;
  req.set_key(std::string(prefix));
  req.set_range_end(PrefixRangeEnd(prefix));
  pb::RangeResponse resp;
  RC_RETURN_IF_ERROR(Call(absl::StrCat("etcd GetPrefix ", prefix), call, /*idempotent=*/true,
                          [&](Endpoint& ep, Attempt& a) {
                            return FromGrpc(ep.kv->Range(&a.ctx, req, &resp), a.what);
                          }));
  RangeResult out;
  out.revision = resp.header().revision();
  out.kvs.reserve(resp.kvs_size());
  for (const auto& kv : resp.kvs()) out.kvs.push_back(FromPb(kv));
  return out;
}

absl::StatusOr<DeleteResult> EtcdClient::Delete(absl::string_view key, const CallOptions& call) {
  pb::DeleteRangeRequest req;
  req.set_key(std::string(key));
  pb::DeleteRangeResponse resp;
  RC_RETURN_IF_ERROR(Call(absl::StrCat("etcd Delete ", key), call, /*idempotent=*/true,
                          [&](Endpoint& ep, Attempt& a) {
                            return FromGrpc(ep.kv->DeleteRange(&a.ctx, req, &resp), a.what);
                          }));
  return DeleteResult{resp.deleted(), resp.header().revision()};
}

absl::StatusOr<DeleteResult> EtcdClient::DeletePrefix(absl::string_view prefix,
                                                      const CallOptions& call) {
  pb::DeleteRangeRequest req;
  req.set_key(std::string(prefix));
  req.set_range_end(PrefixRangeEnd(prefix));
  pb::DeleteRangeResponse resp;
  RC_RETURN_IF_ERROR(Call(absl::StrCat("etcd DeletePrefix ", prefix), call, /*idempotent=*/true,
                          [&](Endpoint& ep, Attempt& a) {
                            return FromGrpc(ep.kv->DeleteRange(&a.ctx, req, &resp), a.what);
                          }));
  return DeleteResult{resp.deleted(), resp.header().revision()};
}

absl::StatusOr<TxnResult> EtcdClient::Txn(const std::vector<TxnCompare>& compares,
                                          const std::vector<TxnOp>& then_ops,
                                          const std::vector<TxnOp>& else_ops,
                                          const CallOptions& call) {
  pb::TxnRequest req;
  for (const TxnCompare& c : compares) ToPb(c, req.add_compare());
  for (const TxnOp& op : then_ops) ToPb(op, req.add_success());
  for (const TxnOp& op : else_ops) ToPb(op, req.add_failure());
  pb::TxnResponse resp;
  RC_RETURN_IF_ERROR(Call("etcd Txn", call, /*idempotent=*/false, [&](Endpoint& ep, Attempt& a) {
    return FromGrpc(ep.kv->Txn(&a.ctx, req, &resp), a.what);
  }));
  return TxnResult{resp.succeeded(), resp.header().revision()};
}

absl::Status EtcdClient::Compact(int64_t revision, const CallOptions& call) {
  pb::CompactionRequest req;
  req.set_revision(revision);
  pb::CompactionResponse resp;
  return Call(absl::StrCat("etcd Compact ", revision), call, /*idempotent=*/true,
              [&](Endpoint& ep, Attempt& a) {
                return FromGrpc(ep.kv->Compact(&a.ctx, req, &resp), a.what);
              });
}

absl::StatusOr<int64_t> EtcdClient::Snapshot(const SnapshotSink& sink, const CallOptions& call) {
  const absl::Duration timeout =
      call.timeout > absl::ZeroDuration() ? call.timeout : options_.call_timeout;
  int64_t revision = 0;
  RC_RETURN_IF_ERROR(Call("etcd Snapshot", call, /*idempotent=*/true, [&](Endpoint& ep,
                                                                          Attempt& a) {
    // The whole stream may take longer than one unary attempt: the call's own deadline.
    a.ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    std::unique_ptr<grpc::ClientReader<pb::SnapshotResponse>> reader =
        ep.maintenance->Snapshot(&a.ctx, pb::SnapshotRequest());
    pb::SnapshotResponse resp;
    bool first = true;
    absl::Status sunk = absl::OkStatus();
    while (reader->Read(&resp)) {
      if (first) {
        revision = resp.header().revision();
      }
      sunk = sink(resp.blob(), first);
      first = false;
      if (!sunk.ok()) {
        a.ctx.TryCancel();
        break;
      }
    }
    absl::Status finished = FromGrpc(reader->Finish(), a.what);
    if (!sunk.ok()) return sunk;
    if (finished.ok() && first) {
      return absl::DataLossError(absl::StrCat(a.what, ": the snapshot stream was empty"));
    }
    return finished;
  }));
  return revision;
}

// ---- Leases ----

absl::StatusOr<int64_t> EtcdClient::LeaseGrant(int64_t ttl_s, const CallOptions& call) {
  if (ttl_s <= 0) return absl::InvalidArgumentError("etcd LeaseGrant: ttl must be positive");
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  pb::LeaseGrantResponse resp;
  // Retrying may grant a second lease; the orphan expires by itself after ttl_s.
  RC_RETURN_IF_ERROR(
      Call("etcd LeaseGrant", call, /*idempotent=*/true, [&](Endpoint& ep, Attempt& a) {
        return FromGrpc(ep.lease->LeaseGrant(&a.ctx, req, &resp), a.what);
      }));
  if (!resp.error().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd LeaseGrant: ", resp.error()));
  }
  return resp.id();
}

absl::Status EtcdClient::LeaseRevoke(int64_t lease_id, const CallOptions& call) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease_id);
  pb::LeaseRevokeResponse resp;
  return Call(absl::StrCat("etcd LeaseRevoke ", lease_id), call, /*idempotent=*/true,
              [&](Endpoint& ep, Attempt& a) {
                return FromGrpc(ep.lease->LeaseRevoke(&a.ctx, req, &resp), a.what);
              });
}

absl::StatusOr<int64_t> EtcdClient::LeaseKeepAliveOnce(int64_t lease_id, const CallOptions& call) {
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease_id);
  pb::LeaseKeepAliveResponse resp;
  // LeaseKeepAlive is a bidi stream; one request and one response per call keeps this simple
  // (a renewal every TTL/3 makes the stream setup cost irrelevant).
  RC_RETURN_IF_ERROR(
      Call(absl::StrCat("etcd LeaseKeepAlive ", lease_id), call, /*idempotent=*/true,
           [&](Endpoint& ep, Attempt& a) -> absl::Status {
             auto stream = ep.lease->LeaseKeepAlive(&a.ctx);
             if (stream->Write(req) && stream->Read(&resp)) {
               stream->WritesDone();
               stream->Finish().IgnoreError();  // the server ends the stream on our half-close
               return absl::OkStatus();
             }
             grpc::Status s = stream->Finish();
             if (s.ok()) s = grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream closed early");
             return FromGrpc(s, a.what);
           }));
  if (resp.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd lease ", lease_id, " expired or not found"));
  }
  return resp.ttl();
}

// ---- Watch ----

Watch::Watch(std::unique_ptr<State> state) : state_(std::move(state)) {}

Watch::~Watch() {
  {
    absl::MutexLock l(&state_->mu);
    state_->stopping = true;
    if (state_->ctx != nullptr) state_->ctx->TryCancel();
  }
  if (state_->thread.joinable()) state_->thread.join();
}

int64_t Watch::next_revision() const {
  absl::MutexLock l(&state_->mu);
  return state_->next_revision;
}

bool Watch::compacted() const {
  absl::MutexLock l(&state_->mu);
  return state_->compacted;
}

std::unique_ptr<Watch> EtcdClient::WatchPrefix(std::string prefix, int64_t start_revision,
                                               EventsCallback on_events,
                                               CompactedCallback on_compacted) {
  auto state = std::make_unique<Watch::State>();
  state->prefix = std::move(prefix);
  state->on_events = std::move(on_events);
  state->on_compacted = std::move(on_compacted);
  {
    absl::MutexLock l(&state->mu);
    state->next_revision = start_revision;
  }
  Watch::State* raw = state.get();
  state->thread = std::thread([this, raw] { RunWatch(raw); });
  return std::unique_ptr<Watch>(new Watch(std::move(state)));
}

// How one attempt of the watch thread ended.
struct EtcdClient::WatchAttempt {
  bool healthy = false;          // the server answered (reset the backoff)
  int64_t compact_revision = 0;  // > 0: the resume revision was compacted
};

std::optional<int64_t> Watch::State::Enter(grpc::ClientContext* context) {
  absl::MutexLock l(&mu);
  if (stopping) return std::nullopt;
  ctx = context;
  return next_revision;
}

void Watch::State::Leave() {
  absl::MutexLock l(&mu);
  ctx = nullptr;
}

void EtcdClient::PinWatchStart(Endpoint& ep, Watch::State* s, WatchAttempt* out) {
  grpc::ClientContext ctx;
  if (!s->Enter(&ctx)) return;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  pb::RangeRequest req;
  req.set_key(s->prefix);
  req.set_range_end(PrefixRangeEnd(s->prefix));
  req.set_count_only(true);
  pb::RangeResponse resp;
  const bool ok = ep.kv->Range(&ctx, req, &resp).ok();
  s->Leave();
  if (!ok) return;
  out->healthy = true;
  absl::MutexLock l(&s->mu);
  s->next_revision = resp.header().revision() + 1;
}

void EtcdClient::RunWatchStream(Endpoint& ep, Watch::State* s, WatchAttempt* out) {
  grpc::ClientContext ctx;
  const std::optional<int64_t> start = s->Enter(&ctx);
  if (!start) return;
  pb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(s->prefix);
  create->set_range_end(PrefixRangeEnd(s->prefix));
  create->set_start_revision(*start);
  auto stream = ep.watch->Watch(&ctx);
  pb::WatchResponse resp;
  if (stream->Write(req)) {
    while (stream->Read(&resp)) {
      if (resp.compact_revision() > 0) {
        out->compact_revision = resp.compact_revision();
        break;
      }
      if (resp.canceled()) break;  // e.g. "no leader": reconnect, backing off
      out->healthy = true;
      if (resp.events_size() == 0) continue;  // created / progress notification
      std::vector<Event> events;
      events.reserve(resp.events_size());
      for (const auto& e : resp.events()) {
        const bool del = e.type() == ::mvccpb::Event::DELETE;
        events.push_back(Event{del ? Event::Type::kDelete : Event::Type::kPut, FromPb(e.kv())});
      }
      const int64_t revision = events.back().kv.mod_revision;
      {
        absl::MutexLock l(&s->mu);
        s->next_revision = revision + 1;
      }
      s->on_events(events, revision);
    }
  }
  ctx.TryCancel();
  stream->Finish().IgnoreError();
  s->Leave();
}

void EtcdClient::RunWatch(Watch::State* s) {
  absl::Duration backoff = options_.backoff_min;
  for (;;) {
    const size_t index = current_endpoint();
    Endpoint& ep = *endpoints_[index];
    WatchAttempt attempt;
    bool pinned = false;
    {
      absl::MutexLock l(&s->mu);
      pinned = s->next_revision != 0;
    }
    if (!pinned) {
      // "From now": pin now to a revision first, so that a reconnect before the first event
      // resumes from there and not from a later "now" (which would skip what happened between).
      PinWatchStart(ep, s, &attempt);
    } else {
      RunWatchStream(ep, s, &attempt);
    }
    {
      absl::MutexLock l(&s->mu);
      if (s->stopping) return;
      if (attempt.compact_revision > 0) s->compacted = true;
      if (!pinned && s->next_revision != 0) continue;  // pinned: open the stream right away
    }
    if (attempt.compact_revision > 0) {
      if (s->on_compacted) s->on_compacted(attempt.compact_revision);
      return;
    }
    if (attempt.healthy) backoff = options_.backoff_min;
    RotateFrom(index);
    absl::MutexLock l(&s->mu);
    s->mu.AwaitWithTimeout(absl::Condition(&s->stopping), backoff);
    if (s->stopping) return;
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

}  // namespace ringcache::membership
