// The pool's write-back log path: log copies placed on data nodes apart from the homes,
// group-committed appends with retries, seals, reclaims, scans and fetches of records.
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "datanode/client/datanode_pool.h"
#include "datanode/client/pool_internal.h"

namespace ringcache::datanode {

using pool_internal::NowMs;
using pool_internal::Seconds;
using pool_internal::Unreachable;
using pool_internal::InlineCallsAllowed;
using pool_internal::LogPortsAllowed;

std::vector<uint32_t> DataNodePool::LogCandidatesIn(const View& v, uint32_t vdi, uint64_t object,
                                                    int n) {
  const int total = static_cast<int>(v.ring_members.size());
  n = std::min(n, total);
  auto order = v.ring->Owners(ring::ObjectKey{vdi, object}, total);
  if (!order.ok()) return {};
  // docs/design.md §4: log copies live outside the object's N homes, on the next nodes of the data
  // ring; only when the cluster is too small do they fall back on the homes (last home first).
  std::vector<uint32_t> out(order->begin() + n, order->end());
  for (int i = n - 1; i >= 0; --i) out.push_back((*order)[i]);
  std::erase_if(out, [&v](uint32_t id) { return v.spec.IsOut(id); });
  return out;
}

absl::StatusOr<LogAppendResult> DataNodePool::LogAppend(uint32_t vdi, uint64_t object, int n,
                                                        int copies, const v1::LogAppendRequest& req,
                                                        const std::function<void()>& overlap) {
  LogAppendResult result;
  if (copies <= 0 || req.records_size() == 0) {
    if (overlap) overlap();
    return result;
  }
  const auto v = view();
  std::vector<uint32_t> cand = LogCandidatesIn(*v, vdi, object, n);
  // Nodes that failed in the last second go last, so one dead node does not cost every write a
  // timeout (the order stays deterministic among healthy nodes).
  const int64_t now = NowMs();
  std::stable_partition(cand.begin(), cand.end(), [&](uint32_t id) {
    const Node* n = v->Find(id);
    return n->down_since_ms.load() == 0 && now - n->failed_at_ms.load() > 1000;
  });
  struct Call {
    LogWaiter waiter;
    bool over_limit = false;
    bool sent_inline = false;  // StartLogInline sent it: FinishLogInline reads the answer
    grpc::Status status;
  };
  absl::Status last = absl::UnavailableError("no data node to hold the log records");
  bool overlapped = false;
  // Candidates that answered UNAVAILABLE: a connection reset, a node restarting. Asked again
  // below when the others are not enough (an append is idempotent: records are keyed by
  // writer and sequence).
  std::vector<uint32_t> unavailable;
  // A data node refused the records: the writer's log was sealed for a replay (it lost its
  // objects). No other node may take them instead: the write fails.
  absl::Status sealed;
  // Appends to `cand` in order, `copies` at a time, until enough nodes hold the records.
  auto append_to = [&](const std::vector<uint32_t>& cand) {
    size_t next = 0;
    while (static_cast<int>(result.nodes.size()) < copies && next < cand.size() && sealed.ok()) {
      const size_t want = std::min<size_t>(copies - result.nodes.size(), cand.size() - next);
      std::vector<Call> calls(want);
      std::vector<uint32_t> ids(cand.begin() + next, cand.begin() + next + want);
      next += want;
      absl::BlockingCounter pending(static_cast<int>(want));
      for (size_t i = 0; i < want; ++i) {
        Node* node = v->Find(ids[i]);
        node->inflight.fetch_add(1);
        const auto start = std::chrono::steady_clock::now();
        calls[i].waiter.req = &req;
        calls[i].waiter.done = [&, i, node, start](const grpc::Status& s, bool over_limit) {
          calls[i].status = s;
          calls[i].over_limit = over_limit;
          node->inflight.fetch_sub(1);
          Observe(node, Seconds(start));
          pending.DecrementCount();
        };
        const Inline how = StartLogInline(node, &calls[i].waiter);
        if (how == Inline::kNotTaken) SendLog(node, &calls[i].waiter);
        calls[i].sent_inline = how == Inline::kSent;
      }
      if (!overlapped && overlap) {  // while the first round is in flight
        overlapped = true;
        overlap();
      }
      for (size_t i = 0; i < want; ++i) {
        if (calls[i].sent_inline) FinishLogInline(v->Find(ids[i]), &calls[i].waiter);
      }
      pending.Wait();
      for (size_t i = 0; i < want; ++i) {
        if (!calls[i].status.ok()) {
          last = FromGrpc(calls[i].status, absl::StrCat("log append on data node ", ids[i]));
          if (IsKind(last, ErrorKind::kLogSealed)) sealed = last;
          if (calls[i].status.error_code() == grpc::StatusCode::UNAVAILABLE) {
            unavailable.push_back(ids[i]);
          }
          continue;
        }
        result.nodes.push_back(ids[i]);
        result.over_limit |= calls[i].over_limit;
      }
    }
  };
  append_to(cand);
  // A transient fault is retried, not reported: the nodes that were unavailable get two more
  // tries on fresh connections (gRPC reconnects) before the write fails.
  for (const absl::Duration pause : {absl::Milliseconds(20), absl::Milliseconds(200)}) {
    if (static_cast<int>(result.nodes.size()) >= copies || unavailable.empty() || !sealed.ok()) {
      break;
    }
    absl::SleepFor(pause);
    std::vector<uint32_t> again;
    again.swap(unavailable);
    if (log_retries_ != nullptr) log_retries_->Increment(again.size());
    append_to(again);
  }
  if (!overlapped && overlap) overlap();  // no candidate at all
  if (!sealed.ok()) return sealed;
  if (static_cast<int>(result.nodes.size()) < copies) {
    return absl::UnavailableError(absl::StrCat("log records on ", result.nodes.size(), " of ",
                                               copies, " data nodes: ", last.message()));
  }
  // Overlap: a holder that is one of the object's homes.
  auto homes = HomesIn(*v, vdi, object, n);
  if (homes.ok()) {
    for (uint32_t id : result.nodes) {
      if (std::find(homes->begin(), homes->end(), id) != homes->end()) ++result.overlapping;
    }
  }
  return result;
}

namespace {
// Largest data of one group-committed LogAppend call (gRPC's default message limit is 4 MiB).
constexpr size_t kLogBatchBytes = 2 << 20;
}  // namespace

namespace pool_internal {
bool LogPortsAllowed() {
  static const bool allowed = [] {
    const char* t = std::getenv("RINGCACHE_LOG_TRANSPORT");
    return t == nullptr || std::string_view(t) != "grpc";
  }();
  return allowed;
}
bool BlocksOnLogPortsAllowed() {
  static const bool allowed = [] {
    const char* t = std::getenv("RINGCACHE_LOG_TRANSPORT");
    return LogPortsAllowed() && (t == nullptr || std::string_view(t) != "appends");
  }();
  return allowed;
}
bool InlineCallsAllowed() {
  static const bool allowed = [] {
    const char* t = std::getenv("RINGCACHE_LOG_TRANSPORT");
    return t == nullptr || std::string_view(t) != "handoff";
  }();
  return allowed;
}
}  // namespace pool_internal

void DataNodePool::EndLogCall(Node* node, const std::vector<LogWaiter*>& waiters,
                              const grpc::Status& s, bool over_limit) {
  Note(node, s);
  // Pick the next batch before waking this one's callers: once they return, nothing may touch
  // this pool unless other callers still wait (then it is alive).
  bool more;
  {
    absl::MutexLock l(&node->log_mu);
    more = !node->log_queue.empty();
    if (!more) node->log_sending = false;
  }
  for (LogWaiter* w : waiters) w->done(s, over_limit);
  if (more) SendLogBatch(node);
}

DataNodePool::Inline DataNodePool::StartLogInline(Node* node, LogWaiter* w) {
  if (node->log_link == nullptr || !LogPortsAllowed() || !InlineCallsAllowed() ||
      log_fault_for_test_ || !node->log_link->usable()) {
    return Inline::kNotTaken;
  }
  {
    absl::MutexLock l(&node->log_mu);
    if (node->log_sending) return Inline::kNotTaken;  // the queue is empty when nothing is sent
    node->log_sending = true;
  }
  if (node->log_calls != nullptr) node->log_calls->Increment();
  if (log_inline_ != nullptr) log_inline_->Increment();
  if (absl::Status s = node->log_link->BeginCall(*w->req); !s.ok()) {
    EndLogCall(node, {w}, ToGrpc(s), false);
    return Inline::kDone;
  }
  return Inline::kSent;
}

void DataNodePool::FinishLogInline(Node* node, LogWaiter* w) {
  v1::LogAppendResponse resp;
  const absl::Status s = node->log_link->FinishCall(&resp);
  EndLogCall(node, {w}, ToGrpc(s), resp.over_limit());
}

void DataNodePool::SendLog(Node* node, LogWaiter* w) {
  {
    absl::MutexLock l(&node->log_mu);
    node->log_queue.push_back(w);
    if (node->log_sending) return;  // the call in flight sends it next
    node->log_sending = true;
  }
  SendLogBatch(node);
}

void DataNodePool::SendLogBatch(Node* node) {
  struct Batch {
    std::unique_ptr<grpc::ClientContext> ctx;
    v1::LogAppendRequest req;
    v1::LogAppendResponse resp;
    std::vector<LogWaiter*> waiters;
  };
  auto batch = std::make_shared<Batch>();
  {
    absl::MutexLock l(&node->log_mu);
    size_t bytes = 0, take = 0;
    for (; take < node->log_queue.size(); ++take) {
      const size_t b = node->log_queue[take]->req->ByteSizeLong();
      if (take > 0 && bytes + b > kLogBatchBytes) break;
      bytes += b;
    }
    if (take == 0) {
      node->log_sending = false;
      return;
    }
    batch->waiters.assign(node->log_queue.begin(), node->log_queue.begin() + take);
    node->log_queue.erase(node->log_queue.begin(), node->log_queue.begin() + take);
  }
  // A lone append goes as its caller built it (the caller waits for `done`, so it outlives the
  // call); only a group is merged into one request.
  const v1::LogAppendRequest* req = batch->waiters[0]->req;
  if (batch->waiters.size() > 1) {
    for (LogWaiter* w : batch->waiters) {
      batch->req.mutable_records()->MergeFrom(w->req->records());
    }
    req = &batch->req;
  }
  auto finish = [this, node, batch](grpc::Status s) {
    EndLogCall(node, batch->waiters, s, batch->resp.over_limit());
  };
  if (log_fault_for_test_) {
    if (grpc::Status injected = log_fault_for_test_(node->endpoint.id); !injected.ok()) {
      finish(injected);
      return;
    }
  }
  if (node->log_calls != nullptr) node->log_calls->Increment();
  if (node->log_link != nullptr && LogPortsAllowed() && node->log_link->usable()) {
    node->log_link->Send(req, &batch->resp,
                         [finish = std::move(finish)](absl::Status s) { finish(ToGrpc(s)); });
    return;
  }
  batch->ctx = Context();
  node->stub->async()->LogAppend(batch->ctx.get(), req, &batch->resp, std::move(finish));
}

std::vector<uint32_t> DataNodePool::LogReclaim(uint32_t cache_node,
                                               const std::vector<uint64_t>& seqs, uint64_t below) {
  std::vector<uint32_t> failed;
  if (seqs.empty() && below == 0) return failed;
  v1::LogReclaimRequest req;
  req.set_cache_node_id(cache_node);
  for (uint64_t s : seqs) req.add_sequences(s);
  req.set_below_sequence(below);
  req.mutable_fence()->set_term(control_term());
  const auto v = view();
  // Out nodes are skipped: they keep their stale records until they are cleared to rejoin.
  const std::vector<Node*>& nodes = v->live;
  const std::vector<grpc::Status> got =
      CallEach(nodes, [&req](size_t, Node* node, grpc::ClientContext* ctx, Done done) {
        auto resp = std::make_shared<v1::LogReclaimResponse>();
        node->stub->async()->LogReclaim(ctx, &req, resp.get(),
                                        [resp, done](grpc::Status s) { done(std::move(s)); });
      });
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!got[i].ok()) failed.push_back(nodes[i]->endpoint.id);
  }
  return failed;
}

absl::Status DataNodePool::SealLog(uint32_t cache_node, uint64_t below_epoch) {
  v1::SealLogRequest req;
  req.set_cache_node_id(cache_node);
  req.set_below_epoch(below_epoch);
  req.mutable_fence()->set_term(control_term());
  req.mutable_fence()->set_epoch(below_epoch);
  const auto v = view();
  // Every node of the ring(s), out ones too (a writer on an older data ring may still send to
  // them); only the live ones, which the replay scans, must take it.
  const std::vector<Node*>& nodes = v->nodes;
  const std::vector<grpc::Status> got =
      CallEach(nodes, [&req](size_t, Node* node, grpc::ClientContext* ctx, Done done) {
        auto resp = std::make_shared<v1::SealLogResponse>();
        node->stub->async()->SealLog(ctx, &req, resp.get(),
                                     [resp, done](grpc::Status s) { done(std::move(s)); });
      });
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (got[i].ok() || v->spec.IsOut(nodes[i]->endpoint.id)) continue;
    return FromGrpc(got[i], absl::StrCat("seal the log of cache node ", cache_node,
                                         " on data node ", nodes[i]->endpoint.id));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DataNodePool::SealLogOn(uint32_t node, uint32_t cache_node,
                                                 uint64_t below_epoch) {
  v1::SealLogRequest req;
  req.set_cache_node_id(cache_node);
  req.set_below_epoch(below_epoch);
  req.mutable_fence()->set_term(control_term());
  req.mutable_fence()->set_epoch(below_epoch);
  v1::SealLogResponse resp;
  RC_RETURN_IF_ERROR(OnNode(node, "log seal on", [&](auto& stub, grpc::ClientContext* ctx) {
    return stub.SealLog(ctx, req, &resp);
  }));
  return resp.below_epoch();
}

std::vector<grpc::Status> DataNodePool::CallEach(
    const std::vector<Node*>& nodes,
    const std::function<void(size_t, Node*, grpc::ClientContext*, Done)>& start) {
  std::vector<grpc::Status> statuses(nodes.size());
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts(nodes.size());
  absl::BlockingCounter pending(static_cast<int>(nodes.size()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    contexts[i] = Context();
    start(i, nodes[i], contexts[i].get(), [&statuses, &pending, i](grpc::Status s) {
      statuses[i] = std::move(s);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  for (size_t i = 0; i < nodes.size(); ++i) Note(nodes[i], statuses[i]);
  return statuses;
}

absl::Status DataNodePool::LogScan(uint32_t node, uint32_t cache_node, uint64_t from,
                                   bool include_data, const std::function<void(v1::LogRecord&)>& fn,
                                   std::vector<uint64_t>* corrupt) {
  const auto v = view();
  Node* n = v->Find(node);
  if (n == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown data node ", node));
  for (;;) {
    v1::LogScanRequest req;
    req.set_cache_node_id(cache_node);
    req.set_from_sequence(from);
    req.set_limit(include_data ? 256 : 4096);
    req.set_include_data(include_data);
    v1::LogScanResponse resp;
    auto ctx = Context();
    grpc::Status s = n->stub->LogScan(ctx.get(), req, &resp);
    Note(n, s);
    if (!s.ok()) {
      return FromGrpc(s, absl::StrCat("log scan on data node ", node));
    }
    for (auto& r : *resp.mutable_records()) fn(r);
    if (corrupt != nullptr) {
      corrupt->insert(corrupt->end(), resp.corrupt_sequences().begin(),
                      resp.corrupt_sequences().end());
    }
    if (resp.done() || resp.next_sequence() <= from) return absl::OkStatus();
    from = resp.next_sequence();
  }
}

absl::StatusOr<v1::LogRecord> DataNodePool::FetchLogRecord(uint32_t cache_node, uint64_t seq) {
  absl::Status last = absl::NotFoundError(
      absl::StrCat("log record ", seq, " of cache node ", cache_node, " is on no data node"));
  const auto v = view();  // held for the loop: the pool may swap its view
  for (Node* n : v->live) {
    v1::LogScanRequest req;
    req.set_cache_node_id(cache_node);
    req.set_from_sequence(seq);
    req.set_limit(1);
    req.set_include_data(true);
    v1::LogScanResponse resp;
    auto ctx = Context();
    grpc::Status s = n->stub->LogScan(ctx.get(), req, &resp);
    if (!s.ok()) {
      last = FromGrpc(s, absl::StrCat("log fetch on data node ", n->endpoint.id));
      continue;
    }
    if (resp.records_size() == 1 && resp.records(0).sequence() == seq &&
        BlockChecksum(resp.records(0).data()) == resp.records(0).checksum()) {
      return std::move(*resp.mutable_records(0));
    }
  }
  return last;
}

}  // namespace ringcache::datanode
