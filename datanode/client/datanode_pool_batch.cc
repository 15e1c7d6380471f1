// DataNodePool::WriteAllBatch: a destage batch's runs written home, one request per data node
// (kStoreBlocksBatch on its store link, node-api 3) instead of one per run and home. Each run
// keeps WriteAll's promise: it is OK only when every one of its homes stored it.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/errors.h"
#include "common/grpc_status.h"
#include "datanode/client/datanode_pool.h"
#include "datanode/client/pool_internal.h"

namespace ringcache::datanode {
namespace {

// One result of a batch's answer as the status it stands for.
absl::Status ResultStatus(const v1::BlockWriteResult& r) {
  if (r.code() == 0) return absl::OkStatus();
  const ErrorKind kind = ErrorKindFromName(r.kind());
  if (kind != ErrorKind::kNone) return TypedError(kind, r.message());
  return absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
}

std::string What(uint32_t node) { return absl::StrCat("write to data node ", node); }

}  // namespace

std::vector<absl::Status> DataNodePool::WriteAllBatch(const std::vector<RunWrite>& runs,
                                                      std::vector<uint32_t>* stored) {
  const auto v = view();  // held until every write answered (SetRing waits for it)
  std::vector<absl::Status> out(runs.size());
  std::vector<uint32_t> most(runs.size(), 0);  // per run, the most blocks one home stored
  std::vector<v1::WriteBlocksRequest> reqs(runs.size());
  // Per data node, the runs it is a home of; per run and home, the home's answer.
  absl::flat_hash_map<uint32_t, std::vector<size_t>> by_node;
  std::vector<absl::flat_hash_map<uint32_t, absl::Status>> answers(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunWrite& r = runs[i];
    absl::StatusOr<std::vector<uint32_t>> homes = WriteHomesIn(*v, r.vdi, r.object, r.n);
    if (!homes.ok()) {
      out[i] = homes.status();
      continue;
    }
    reqs[i] = pool_internal::BlockWriteRequest(r.vdi, r.object, r.first, *r.data, &r.stamp);
    for (uint32_t h : *homes) {
      by_node[h].push_back(i);
      answers[i][h] = absl::UnavailableError("not sent");
    }
  }
  // Sends the runs listed per node, all nodes at once, and waits for every answer.
  auto round = [&](const absl::flat_hash_map<uint32_t, std::vector<size_t>>& todo) {
    struct Begun {
      Node* node;
      const std::vector<size_t>* runs;
      std::chrono::steady_clock::time_point start;
    };
    std::vector<Begun> begun;
    struct Call {
      std::unique_ptr<grpc::ClientContext> ctx;
      v1::WriteBlocksResponse resp;
      grpc::Status status;
      Node* node;
      uint32_t id;
      size_t run;
      std::chrono::steady_clock::time_point start;
    };
    std::vector<std::unique_ptr<Call>> calls;
    for (const auto& [id, list] : todo) {
      Node* node = v->Find(id);
      if (write_fault_for_test_) {
        if (grpc::Status injected = write_fault_for_test_(id); !injected.ok()) {
          for (size_t i : list) answers[i][id] = FromGrpc(injected, What(id));
          continue;
        }
      }
      if (node->store_link != nullptr && pool_internal::BlocksOnLogPortsAllowed() &&
          pool_internal::InlineCallsAllowed() && node->store_link->stores_batches()) {
        v1::WriteBlocksBatchRequest batch;
        for (size_t i : list) *batch.add_writes() = reqs[i];
        absl::Status sent;
        const auto start = std::chrono::steady_clock::now();
        node->inflight.fetch_add(1);
        if (node->store_link->TryBeginStoreBatch(batch, &sent)) {
          if (sent.ok()) {
            begun.push_back({node, &list, start});
          } else {
            node->inflight.fetch_sub(1);
            Note(node, ToGrpc(sent));
            for (size_t i : list) answers[i][id] = Annotate(sent, What(id) + ": ");
          }
          continue;
        }
        node->inflight.fetch_sub(1);
      }
      // The link is busy (or the node older): each run to it over gRPC, all at once.
      for (size_t i : list) {
        auto c = std::make_unique<Call>();
        c->node = node;
        c->id = id;
        c->run = i;
        calls.push_back(std::move(c));
      }
    }
    absl::BlockingCounter pending(static_cast<int>(calls.size()));
    for (auto& c : calls) {
      Call* call = c.get();
      call->ctx = Context();
      call->start = std::chrono::steady_clock::now();
      call->node->inflight.fetch_add(1);
      call->node->stub->async()->WriteBlocks(call->ctx.get(), &reqs[call->run], &call->resp,
                                             [this, call, &pending](grpc::Status s) {
                                               Note(call->node, s);
                                               call->node->inflight.fetch_sub(1);
                                               Observe(call->node,
                                                       pool_internal::Seconds(call->start));
                                               call->status = std::move(s);
                                               pending.DecrementCount();
                                             });
    }
    for (const Begun& b : begun) {
      v1::WriteBlocksBatchResponse resp;
      absl::Status s = b.node->store_link->FinishStoreBatch(&resp);
      if (s.ok() && resp.results_size() != static_cast<int>(b.runs->size())) {
        s = absl::DataLossError(absl::StrCat("a batch answer of ", resp.results_size(),
                                             " results for ", b.runs->size(), " writes"));
      }
      Note(b.node, ToGrpc(s));
      b.node->inflight.fetch_sub(1);
      Observe(b.node, pool_internal::Seconds(b.start));
      const uint32_t id = b.node->endpoint.id;
      for (size_t k = 0; k < b.runs->size(); ++k) {
        const size_t run = (*b.runs)[k];
        answers[run][id] =
            Annotate(s.ok() ? ResultStatus(resp.results(static_cast<int>(k))) : s, What(id) + ": ");
        if (answers[run][id].ok()) {
          most[run] = std::max(most[run], resp.results(static_cast<int>(k)).blocks_stored());
        }
      }
    }
    pending.Wait();
    for (const auto& c : calls) {
      answers[c->run][c->id] = FromGrpc(c->status, What(c->id));
      if (c->status.ok()) most[c->run] = std::max(most[c->run], c->resp.blocks_stored());
    }
  };
  round(by_node);
  // A transient fault is retried, not reported: a stamped write is idempotent (a home keeps the
  // newest version), so what a home answered UNAVAILABLE is asked again before it fails.
  for (const absl::Duration pause : {absl::Milliseconds(20), absl::Milliseconds(200)}) {
    absl::flat_hash_map<uint32_t, std::vector<size_t>> again;
    size_t count = 0;
    for (const auto& [id, list] : by_node) {
      for (size_t i : list) {
        if (absl::IsUnavailable(answers[i][id])) {
          again[id].push_back(i);
          ++count;
        }
      }
    }
    if (again.empty()) break;
    absl::SleepFor(pause);
    if (write_retries_ != nullptr) write_retries_->Increment(static_cast<double>(count));
    round(again);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!out[i].ok()) continue;
    // The homes in id order: the error named is the same whichever answered first.
    std::vector<std::pair<uint32_t, absl::Status>> homes(answers[i].begin(), answers[i].end());
    std::sort(homes.begin(), homes.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [id, s] : homes) {
      if (!s.ok()) {
        out[i] = s;
        break;
      }
    }
  }
  if (stored != nullptr) *stored = std::move(most);
  return out;
}

}  // namespace ringcache::datanode
