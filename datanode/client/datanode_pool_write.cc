// DataNodePool's writes home: WriteAll (one run) is a batch of one of WriteAllBatch, which sends
// each data node the runs it is a home of in one request where it can (kStoreBlocksBatch on its
// store link, node-api 3) instead of one per run and home; TrimAll. A run is OK only when every
// one of its homes stored it.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/errors.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
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

absl::Status DataNodePool::WriteAll(uint32_t vdi, uint64_t object, uint32_t first,
                                    const std::string& data, int n, const HomeStamp* stamp,
                                    uint32_t* stored) {
  std::vector<RunWrite> one;
  one.push_back({vdi, object, first, &data, n, stamp != nullptr ? *stamp : HomeStamp{},
                 stamp != nullptr});
  std::vector<uint32_t> most;
  absl::Status s = std::move(WriteAllBatch(one, &most)[0]);
  if (s.ok() && stored != nullptr) *stored = most[0];
  return s;
}

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
    reqs[i] = pool_internal::BlockWriteRequest(r.vdi, r.object, r.first, *r.data,
                                               r.stamped ? &r.stamp : nullptr);
    for (uint32_t h : *homes) {
      by_node[h].push_back(i);
      answers[i][h] = absl::UnavailableError("not sent");
    }
  }
  const auto answer = [&](size_t run, uint32_t id, const absl::Status& s, uint32_t blocks) {
    answers[run][id] = s;
    if (s.ok()) most[run] = std::max(most[run], blocks);
  };
  // Sends the runs listed per node, all nodes at once, and waits for every answer. On a node's
  // store link when it takes block writes and no other write is on it: sent and awaited on this
  // thread (no hand-off to the link's or gRPC's threads and back, a few context switches per
  // home), all of the node's runs in one request where it takes batches. Else each run on its
  // own: on the link's thread when it is free, over gRPC otherwise, all at once.
  auto round = [&](const absl::flat_hash_map<uint32_t, std::vector<size_t>>& todo) {
    struct Begun {
      Node* node;
      const std::vector<size_t>* runs;
      bool batch;
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
          for (size_t i : list) answer(i, id, FromGrpc(injected, What(id)), 0);
          continue;
        }
      }
      LogLink* link = node->store_link.get();
      const bool batch = list.size() > 1;
      if (link != nullptr && pool_internal::BlocksOnLogPortsAllowed() &&
          pool_internal::InlineCallsAllowed() &&
          (batch ? link->stores_batches() : link->stores_blocks())) {
        absl::Status sent;
        const auto start = std::chrono::steady_clock::now();
        node->inflight.fetch_add(1);
        bool taken;
        if (batch) {
          v1::WriteBlocksBatchRequest req;
          for (size_t i : list) *req.add_writes() = reqs[i];
          taken = link->TryBeginStoreBatch(req, &sent);
        } else {
          taken = link->TryBeginStore(reqs[list[0]], &sent);
        }
        if (taken && sent.ok()) {
          begun.push_back({node, &list, batch, start});
          continue;
        }
        node->inflight.fetch_sub(1);
        if (taken) {
          Note(node, ToGrpc(sent));
          for (size_t i : list) answer(i, id, Annotate(sent, What(id) + ": "), 0);
          continue;
        }
      }
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
      call->start = std::chrono::steady_clock::now();
      call->node->inflight.fetch_add(1);
      auto finish = [this, call, &pending](grpc::Status s) {
        Note(call->node, s);
        call->node->inflight.fetch_sub(1);
        Observe(call->node, pool_internal::Seconds(call->start));
        call->status = std::move(s);
        pending.DecrementCount();
      };
      LogLink* link = call->node->store_link.get();
      if (link != nullptr && pool_internal::BlocksOnLogPortsAllowed() && link->stores_blocks() &&
          link->TrySendStore(&reqs[call->run], &call->resp,
                             [finish](absl::Status s) { finish(ToGrpc(s)); })) {
        continue;
      }
      call->ctx = Context();  // only a call over gRPC needs one
      call->node->stub->async()->WriteBlocks(call->ctx.get(), &reqs[call->run], &call->resp,
                                             std::move(finish));
    }
    for (const Begun& b : begun) {
      const uint32_t id = b.node->endpoint.id;
      absl::Status s;
      v1::WriteBlocksBatchResponse resp;
      if (b.batch) {
        s = b.node->store_link->FinishStoreBatch(&resp);
        if (s.ok() && resp.results_size() != static_cast<int>(b.runs->size())) {
          s = absl::DataLossError(absl::StrCat("a batch answer of ", resp.results_size(),
                                               " results for ", b.runs->size(), " writes"));
        }
      } else {
        v1::WriteBlocksResponse one;
        s = b.node->store_link->FinishStore(&one);
        resp.add_results()->set_blocks_stored(one.blocks_stored());
      }
      Note(b.node, ToGrpc(s));
      b.node->inflight.fetch_sub(1);
      Observe(b.node, pool_internal::Seconds(b.start));
      for (size_t k = 0; k < b.runs->size(); ++k) {
        if (!s.ok()) {
          answer((*b.runs)[k], id, Annotate(s, What(id) + ": "), 0);
          continue;
        }
        const v1::BlockWriteResult& r = resp.results(static_cast<int>(k));
        answer((*b.runs)[k], id, Annotate(ResultStatus(r), What(id) + ": "), r.blocks_stored());
      }
    }
    pending.Wait();
    for (const auto& c : calls) {
      answer(c->run, c->id, FromGrpc(c->status, What(c->id)), c->resp.blocks_stored());
    }
  };
  round(by_node);
  // A transient fault is retried, not reported: a stamped write is idempotent (a home keeps the
  // newest version), so what a home answered UNAVAILABLE (a reset connection, a restart) is
  // asked again on fresh connections before it fails.
  for (const absl::Duration pause : {absl::Milliseconds(20), absl::Milliseconds(200)}) {
    absl::flat_hash_map<uint32_t, std::vector<size_t>> again;
    size_t count = 0;
    for (const auto& [id, list] : by_node) {
      for (size_t i : list) {
        if (runs[i].stamped && absl::IsUnavailable(answers[i][id])) {
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

absl::Status DataNodePool::TrimAll(uint32_t vdi, uint64_t object, uint32_t first,
                                   uint32_t count, int n, const HomeStamp* stamp) {
  const auto v = view();
  RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes, WriteHomesIn(*v, vdi, object, n));
  for (uint32_t id : homes) {
    v1::TrimBlocksRequest req;
    req.mutable_range()->set_vdi_id(vdi);
    req.mutable_range()->set_object_index(object);
    req.mutable_range()->set_first_block(first);
    req.mutable_range()->set_block_count(count);
    if (stamp != nullptr) {
      req.set_writer_node(stamp->writer);
      for (uint64_t s : stamp->seqs) req.add_versions(s);
      for (uint64_t e : stamp->epochs) req.add_epochs(e);
    }
    v1::TrimBlocksResponse resp;
    auto ctx = Context();
    RC_RETURN_IF_ERROR(
        FromGrpc(v->Find(id)->stub->TrimBlocks(ctx.get(), req, &resp),
                 absl::StrCat("trim on data node ", id)));
  }
  return absl::OkStatus();
}

}  // namespace ringcache::datanode
