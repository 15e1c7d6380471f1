#include "datanode/service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/errors.h"
#include "common/formats.h"
#include "common/grpc_tls.h"
#include "common/status_macros.h"

namespace ringcache::datanode {

namespace {

std::vector<uint64_t> Checksums(const google::protobuf::RepeatedField<uint64_t>& f) {
  return std::vector<uint64_t>(f.begin(), f.end());
}

// The port admits cache nodes and gateways; the control methods (VDIs, rings, seals, scans for
// the rebalancer, scrubs, clearing the store) are the gateways' alone: a cache node's
// certificate, which reads and writes blocks and its log, cannot seal another node's log or
// clear a store (docs/security.md, "Who may call what").
grpc::Status GatewaysOnly(const grpc::ServerContext& ctx, const char* method) {
  return tls::RequirePeerRole(ctx, {tls::kRoleGateway}, method);
}

}  // namespace

DataNodeService::DataNodeService(uint32_t node_id, BlockStore* store, HddEmulator* hdd,
                                 metrics::Registry* registry)
    : node_id_(node_id), store_(store), hdd_(hdd), registry_(registry) {
  put_vdi_ = MakeOp("put_vdi");
  delete_vdi_ = MakeOp("delete_vdi");
  write_ = MakeOp("write_blocks");
  read_ = MakeOp("read_blocks");
  trim_ = MakeOp("trim_blocks");
  scan_ = MakeOp("scan_blocks");
  log_append_ = MakeOp("log_append");
  log_scan_ = MakeOp("log_scan");
  log_reclaim_ = MakeOp("log_reclaim");
  bytes_written_ = registry_->GetCounter("ringcache_datanode_written_bytes_total",
                                         "Block bytes written durably (destage and repair).");
  bytes_read_ =
      registry_->GetCounter("ringcache_datanode_read_bytes_total", "Block bytes read.");
  data_loss_ = registry_->GetCounter("ringcache_datanode_checksum_failures_total",
                                     "Reads refused because stored data failed its checksum.");
  log_records_appended_ = registry_->GetCounter("ringcache_datanode_log_records_appended_total",
                                                "Write-back log records appended.");
  log_over_limit_ = registry_->GetCounter(
      "ringcache_datanode_log_over_limit_total",
      "Log appends answered with over_limit (the writing cache node must destage).");
  corrupt_log_records_ = registry_->GetCounter(
      "ringcache_datanode_corrupt_log_records_total",
      "Log records found failing their checksum by a scan (skipped; replay takes another copy).");
  log_records_reclaimed_ = registry_->GetCounter(
      "ringcache_datanode_log_records_reclaimed_total", "Write-back log records reclaimed.");
  stale_term_refused_ = registry_->GetCounter(
      "ringcache_datanode_stale_term_refused_total",
      "Control steps (log seal, log reclaim) refused because they carried an older coordinator "
      "term than this node has seen.");
  sealed_appends_refused_ = registry_->GetCounter(
      "ringcache_datanode_sealed_log_appends_refused_total",
      "Log appends refused because their cache node's log was sealed for a replay (the node "
      "lost its objects).");
  registry_->AddCallbackGauge("ringcache_datanode_control_term",
                              "The highest coordinator term a control step carried.", {},
                              [store] { return static_cast<double>(store->control_term()); });
  registry_->AddCallbackGauge("ringcache_datanode_log_records",
                              "Write-back log records currently held.", {},
                              [store] { return static_cast<double>(store->Stats().log_records); });
  registry_->AddCallbackGauge("ringcache_datanode_log_bytes",
                              "Bytes held by the write-back log area.", {},
                              [store] { return static_cast<double>(store->Stats().log_bytes); });
  registry_->AddCallbackGauge(
      "ringcache_datanode_log_limit_bytes",
      "log_limit_bytes: above it log appends are answered over_limit (0 = no limit).", {},
      [this] { return static_cast<double>(log_limit_bytes_.load()); });
  registry_->AddCallbackCounter(
      "ringcache_datanode_older_version_refusals_total",
      "Writes and trims refused because a block held a newer version (fencing token).", {},
      [store] { return static_cast<double>(store->Stats().older_version_refusals); });
  registry_->AddCallbackGauge(
      "ringcache_datanode_device_failed",
      "1 after a write to the store failed (sticky: writes refused until restart).", {},
      [store] { return store->Stats().device_error.empty() ? 0.0 : 1.0; });
  registry_->AddCallbackGauge("ringcache_datanode_store_info",
                              "The store's identity: its incarnation (made at creation).",
                              {{"incarnation", store->incarnation()}}, [] { return 1.0; });
  registry_->AddCallbackGauge("ringcache_datanode_blocks", "Blocks stored (RocksDB estimate).",
                              {}, [store] { return static_cast<double>(store->Stats().blocks); });
}

DataNodeService::OpMetrics DataNodeService::MakeOp(const char* name) {
  OpMetrics tmp;
  tmp.latency = registry_->GetHistogram("ringcache_datanode_request_duration_seconds",
                                        "Data node request latency by operation.",
                                        {{"op", name}});
  tmp.ok = registry_->GetCounter("ringcache_datanode_requests_total",
                                 "Data node requests by operation and result.",
                                 {{"op", name}, {"result", "ok"}});
  tmp.failed = registry_->GetCounter("ringcache_datanode_requests_total",
                                     "Data node requests by operation and result.",
                                     {{"op", name}, {"result", "error"}});
  return tmp;
}

template <typename Fn>
absl::Status DataNodeService::Run(OpMetrics* op, Fn&& fn) {
  if (draining_) return absl::UnavailableError("data node shutting down");
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = fn();
  op->latency->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  (s.ok() ? op->ok : op->failed)->Increment();
  if (s.code() == absl::StatusCode::kDataLoss) data_loss_->Increment();
  return s;
}

grpc::Status DataNodeService::PutVdi(grpc::ServerContext* ctx, const v1::PutVdiRequest* req,
                                     v1::PutVdiResponse*) {
  if (grpc::Status who = GatewaysOnly(*ctx, "PutVdi"); !who.ok()) return who;
  return Timed(&put_vdi_, [&] { return store_->PutVdi(req->vdi(), req->complete()); });
}

grpc::Status DataNodeService::DeleteVdi(grpc::ServerContext* ctx, const v1::DeleteVdiRequest* req,
                                        v1::DeleteVdiResponse* resp) {
  if (grpc::Status who = GatewaysOnly(*ctx, "DeleteVdi"); !who.ok()) return who;
  return Timed(&delete_vdi_, [&]() -> absl::Status {
    auto n = store_->DeleteVdi(req->vdi_id());
    if (!n.ok()) return n.status();
    resp->set_blocks_deleted(*n);
    return absl::OkStatus();
  });
}

grpc::Status DataNodeService::WriteBlocks(grpc::ServerContext*,
                                          const v1::WriteBlocksRequest* req,
                                          v1::WriteBlocksResponse* resp) {
  return ToGrpc(StoreBlocks(*req, resp));
}

absl::Status DataNodeService::StoreBlocks(const v1::WriteBlocksRequest& request,
                                          v1::WriteBlocksResponse* resp) {
  const v1::WriteBlocksRequest* req = &request;
  if (!req->only_if_absent()) client_ops_.fetch_add(1, std::memory_order_relaxed);
  return Run(&write_, [&]() -> absl::Status {
    const auto& r = req->range();
    auto vdi = store_->GetVdi(r.vdi_id());
    if (!vdi.ok()) return vdi.status();
    if (r.block_count() != 0 &&
        static_cast<uint64_t>(r.block_count()) * vdi->block_size() != req->data().size()) {
      return absl::InvalidArgumentError("block_count does not match the payload size");
    }
    hdd_->Charge(req->data().size());
    WriteStamp stamp{req->writer_node(),
                     std::vector<uint64_t>(req->versions().begin(), req->versions().end()),
                     req->only_if_newer(), req->only_if_absent(),
                     std::vector<uint64_t>(req->epochs().begin(), req->epochs().end())};
    auto stored = store_->WriteBlocks(r.vdi_id(), r.object_index(), r.first_block(),
                                      req->data(), Checksums(req->checksums()), stamp);
    if (!stored.ok()) return stored.status();
    resp->set_blocks_stored(*stored);
    bytes_written_->Increment(static_cast<double>(req->data().size()));
    return absl::OkStatus();
  });
}

absl::Status DataNodeService::StoreBlocksBatch(const v1::WriteBlocksBatchRequest& req,
                                               v1::WriteBlocksBatchResponse* resp) {
  for (const v1::WriteBlocksRequest& w : req.writes()) {
    if (!w.only_if_absent()) client_ops_.fetch_add(1, std::memory_order_relaxed);
  }
  return Run(&write_, [&]() -> absl::Status {
    std::vector<BlockWrite> writes;
    std::vector<absl::Status> refused(static_cast<size_t>(req.writes_size()));
    std::vector<size_t> index;  // writes[j] is req.writes(index[j])
    for (int i = 0; i < req.writes_size(); ++i) {
      const v1::WriteBlocksRequest& w = req.writes(i);
      const auto& r = w.range();
      if (r.block_count() != 0) {
        auto vdi = store_->GetVdi(r.vdi_id());
        if (vdi.ok() &&
            static_cast<uint64_t>(r.block_count()) * vdi->block_size() != w.data().size()) {
          refused[i] = absl::InvalidArgumentError("block_count does not match the payload size");
          continue;
        }
      }
      hdd_->Charge(w.data().size());
      writes.push_back(BlockWrite{
          r.vdi_id(), r.object_index(), r.first_block(), w.data(), Checksums(w.checksums()),
          WriteStamp{w.writer_node(), std::vector<uint64_t>(w.versions().begin(), w.versions().end()),
                     w.only_if_newer(), w.only_if_absent(),
                     std::vector<uint64_t>(w.epochs().begin(), w.epochs().end())}});
      index.push_back(static_cast<size_t>(i));
    }
    std::vector<absl::StatusOr<uint32_t>> stored = store_->WriteBlocksBatch(writes);
    for (size_t j = 0; j < stored.size(); ++j) {
      if (stored[j].ok()) {
        bytes_written_->Increment(static_cast<double>(writes[j].data.size()));
      } else {
        refused[index[j]] = stored[j].status();
      }
    }
    size_t next = 0;
    for (int i = 0; i < req.writes_size(); ++i) {
      v1::BlockWriteResult* r = resp->add_results();
      const absl::Status& s = refused[i];
      if (next < index.size() && index[next] == static_cast<size_t>(i)) {
        if (stored[next].ok()) r->set_blocks_stored(*stored[next]);
        ++next;
      }
      if (s.ok()) continue;
      if (s.code() == absl::StatusCode::kDataLoss) data_loss_->Increment();
      r->set_code(static_cast<int32_t>(s.code()));
      r->set_kind(std::string(ErrorKindName(KindOf(s))));
      // The answer must stay within a frame's message bound however many writes fail; cut at a
      // character's start (a proto3 string must be valid UTF-8).
      size_t cut = std::min<size_t>(s.message().size(), 512);
      while (cut > 0 && cut < s.message().size() &&
             (static_cast<unsigned char>(s.message()[cut]) & 0xC0) == 0x80) {
        --cut;
      }
      r->set_message(std::string(s.message().substr(0, cut)));
    }
    return absl::OkStatus();
  });
}

grpc::Status DataNodeService::ReadBlocks(grpc::ServerContext*, const v1::ReadBlocksRequest* req,
                                         v1::ReadBlocksResponse* resp) {
  return ToGrpc(LoadBlocks(*req, resp));
}

absl::Status DataNodeService::LoadBlocks(const v1::ReadBlocksRequest& request,
                                         v1::ReadBlocksResponse* resp) {
  const v1::ReadBlocksRequest* req = &request;
  client_ops_.fetch_add(1, std::memory_order_relaxed);
  return Run(&read_, [&]() -> absl::Status {
    const auto& r = req->range();
    auto res = store_->ReadBlocks(r.vdi_id(), r.object_index(), r.first_block(), r.block_count());
    if (!res.ok()) return res.status();
    for (bool p : res->present) resp->add_present(p);
    resp->set_incomplete(!res->complete);
    for (uint64_t c : res->checksums) resp->add_checksums(c);
    for (const BlockVersion& v : res->versions) {
      resp->add_writers(v.writer);
      resp->add_versions(v.seq);
      resp->add_epochs(v.epoch);
    }
    if (req->presence_only()) return absl::OkStatus();
    hdd_->Charge(res->data.size());
    bytes_read_->Increment(static_cast<double>(res->data.size()));
    *resp->mutable_data() = std::move(res->data);
    return absl::OkStatus();
  });
}

grpc::Status DataNodeService::TrimBlocks(grpc::ServerContext*, const v1::TrimBlocksRequest* req,
                                         v1::TrimBlocksResponse*) {
  client_ops_.fetch_add(1, std::memory_order_relaxed);
  return Timed(&trim_, [&] {
    const auto& r = req->range();
    WriteStamp stamp{req->writer_node(),
                     std::vector<uint64_t>(req->versions().begin(), req->versions().end())};
    stamp.epochs.assign(req->epochs().begin(), req->epochs().end());
    return store_->TrimBlocks(r.vdi_id(), r.object_index(), r.first_block(), r.block_count(),
                              stamp, req->purge());
  });
}

grpc::Status DataNodeService::ScanBlocks(grpc::ServerContext* ctx, const v1::ScanBlocksRequest* req,
                                         v1::ScanBlocksResponse* resp) {
  if (grpc::Status who = GatewaysOnly(*ctx, "ScanBlocks"); !who.ok()) return who;
  return Timed(&scan_, [&]() -> absl::Status {
    ScannedBlock next;
    bool done = false;
    auto blocks = store_->ScanBlocks(req->vdi_id(), req->object_index(), req->block_index(),
                                     std::min<uint32_t>(req->limit(), 4096), req->include_data(),
                                     &next, &done);
    if (!blocks.ok()) return blocks.status();
    uint64_t bytes = 0;
    for (ScannedBlock& b : *blocks) {
      v1::ScannedBlock* o = resp->add_blocks();
      o->set_vdi_id(b.vdi_id);
      o->set_object_index(b.object_index);
      o->set_block_index(b.block_index);
      o->set_trimmed(b.trimmed);
      o->set_writer(b.version.writer);
      o->set_version(b.version.seq);
      o->set_epoch(b.version.epoch);
      bytes += b.data.size();
      *o->mutable_data() = std::move(b.data);
    }
    if (bytes > 0) {
      hdd_->Charge(bytes);
      bytes_read_->Increment(static_cast<double>(bytes));
    }
    resp->set_done(done);
    resp->set_next_vdi_id(next.vdi_id);
    resp->set_next_object_index(next.object_index);
    resp->set_next_block_index(next.block_index);
    return absl::OkStatus();
  });
}

grpc::Status DataNodeService::LogAppend(grpc::ServerContext*, const v1::LogAppendRequest* req,
                                        v1::LogAppendResponse* resp) {
  return ToGrpc(AppendLog(*req, resp));
}

absl::Status DataNodeService::AppendLog(const v1::LogAppendRequest& request,
                                        v1::LogAppendResponse* resp) {
  const v1::LogAppendRequest* req = &request;
  client_ops_.fetch_add(1, std::memory_order_relaxed);
  return Run(&log_append_, [&]() -> absl::Status {
    std::vector<LogEntry> entries;
    entries.reserve(req->records_size());
    uint64_t bytes = 0;
    for (const auto& r : req->records()) {
      entries.push_back({r.cache_node_id(), r.sequence(), r.vdi_id(), r.object_index(),
                         r.block_index(), r.checksum(), r.data(), r.epoch()});
      bytes += r.data().size();
    }
    hdd_->Charge(bytes, /*log_append=*/true);
    auto size = store_->LogAppend(entries);
    if (IsKind(size.status(), ErrorKind::kLogSealed)) sealed_appends_refused_->Increment();
    if (!size.ok()) return size.status();
    log_records_appended_->Increment(static_cast<double>(entries.size()));
    resp->set_log_bytes(*size);
    const uint64_t limit = log_limit_bytes_.load();
    resp->set_limit_bytes(limit);
    if (limit > 0 && *size > limit) {
      resp->set_over_limit(true);
      log_over_limit_->Increment();
    }
    return absl::OkStatus();
  });
}

grpc::Status DataNodeService::LogScan(grpc::ServerContext*, const v1::LogScanRequest* req,
                                      v1::LogScanResponse* resp) {
  return Timed(&log_scan_, [&]() -> absl::Status {
    uint64_t next = 0;
    bool done = false;
    std::vector<uint64_t> corrupt;
    auto recs = store_->LogScan(req->cache_node_id(), req->from_sequence(), req->limit(),
                                req->include_data(), &next, &done, &corrupt);
    if (!recs.ok()) return recs.status();
    for (uint64_t seq : corrupt) {
      resp->add_corrupt_sequences(seq);
      spdlog::error("data node {}: log record {} of cache node {} fails its checksum (skipped; "
                    "another copy serves a replay)",
                    node_id_, seq, req->cache_node_id());
    }
    corrupt_log_records_->Increment(static_cast<double>(corrupt.size()));
    for (auto& e : *recs) {
      v1::LogRecord* r = resp->add_records();
      r->set_cache_node_id(e.cache_node_id);
      r->set_sequence(e.sequence);
      r->set_vdi_id(e.vdi_id);
      r->set_object_index(e.object_index);
      r->set_block_index(e.block_index);
      r->set_checksum(e.checksum);
      r->set_epoch(e.epoch);
      *r->mutable_data() = std::move(e.data);
    }
    resp->set_next_sequence(next);
    resp->set_done(done);
    return absl::OkStatus();
  });
}

grpc::Status DataNodeService::LogReclaim(grpc::ServerContext* ctx,
                                         const v1::LogReclaimRequest* req,
                                         v1::LogReclaimResponse* resp) {
  // Cache nodes reclaim their own records with no fence; a coordinator's term is a gateway's to
  // carry: a raised term would make every real coordinator's control step stale.
  if (req->fence().term() != 0) {
    if (grpc::Status who = GatewaysOnly(*ctx, "LogReclaim with a coordinator term"); !who.ok()) {
      return who;
    }
  }
  return Timed(&log_reclaim_, [&]() -> absl::Status {
    RC_RETURN_IF_ERROR(CheckFence(req->fence(), "log reclaim"));
    std::vector<uint64_t> seqs(req->sequences().begin(), req->sequences().end());
    auto n = store_->LogReclaim(req->cache_node_id(), seqs, req->below_sequence());
    if (!n.ok()) return n.status();
    log_records_reclaimed_->Increment(static_cast<double>(*n));
    resp->set_records_reclaimed(*n);
    return absl::OkStatus();
  });
}

absl::Status DataNodeService::CheckFence(const v1::ControlFence& fence, const char* step) {
  absl::Status s = store_->ObserveControlTerm(fence.term());
  if (IsKind(s, ErrorKind::kStaleTerm)) {
    stale_term_refused_->Increment();
    spdlog::warn("data node {}: {} refused: {}", node_id_, step, std::string(s.message()));
  }
  return s;
}

grpc::Status DataNodeService::SealLog(grpc::ServerContext* ctx, const v1::SealLogRequest* req,
                                      v1::SealLogResponse* resp) {
  if (grpc::Status who = GatewaysOnly(*ctx, "SealLog"); !who.ok()) return who;
  absl::Status s = CheckFence(req->fence(), "log seal");
  if (!s.ok()) return ToGrpc(s);
  auto held = store_->SealLog(req->cache_node_id(), req->below_epoch());
  if (!held.ok()) return ToGrpc(held.status());
  if (req->below_epoch() > 0) {  // 0 only reads the seal
    spdlog::info("data node {}: log of cache node {} sealed below ring epoch {} (term {})",
                 node_id_, req->cache_node_id(), *held, req->fence().term());
  }
  resp->set_below_epoch(*held);
  return grpc::Status::OK;
}

grpc::Status DataNodeService::Health(grpc::ServerContext*, const v1::HealthRequest* req,
                                     v1::HealthResponse* resp) {
  if (absl::Status api = CheckPeerApi(req->api_version(), "the caller"); !api.ok()) {
    return ToGrpc(api);
  }
  resp->set_api_version(kNodeApiFormat.writes);
  resp->set_node_id(node_id_);
  const std::string err = store_->Stats().device_error;
  resp->set_device_failed(!err.empty());
  resp->set_status(!err.empty() ? "device failed: " + err : draining_ ? "draining" : "serving");
  resp->set_store_incarnation(store_->incarnation());
  resp->set_log_port(static_cast<uint32_t>(log_port_.load()));
  return grpc::Status::OK;
}

grpc::Status DataNodeService::ClearStore(grpc::ServerContext* ctx, const v1::ClearStoreRequest* req,
                                         v1::ClearStoreResponse*) {
  if (grpc::Status who = GatewaysOnly(*ctx, "ClearStore"); !who.ok()) return who;
  spdlog::warn("data node {}: clearing the store ({})", node_id_,
               req->reason().empty() ? "asked by a gateway" : req->reason());
  return ToGrpc(store_->Clear());
}

grpc::Status DataNodeService::Scrub(grpc::ServerContext* ctx, const v1::DataNodeScrubRequest* req,
                                    v1::DataNodeScrubReport* resp) {
  if (grpc::Status who = GatewaysOnly(*ctx, "Scrub"); !who.ok()) return who;
  if (scrubber_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this data node runs no scrub");
  }
  if (req->start()) scrubber_->Start();
  *resp = scrubber_->Report();
  return grpc::Status::OK;
}

grpc::Status DataNodeService::PutRing(grpc::ServerContext* ctx, const v1::PutRingRequest* req,
                                      v1::PutRingResponse* resp) {
  if (grpc::Status who = GatewaysOnly(*ctx, "PutRing"); !who.ok()) return who;
  absl::StatusOr<uint64_t> held = store_->PutRing(req->epoch(), req->ring());
  if (!held.ok()) return ToGrpc(held.status());
  resp->set_epoch(*held);
  return grpc::Status::OK;
}

grpc::Status DataNodeService::PutWriterIncarnation(grpc::ServerContext*,
                                                   const v1::PutWriterIncarnationRequest* req,
                                                   v1::PutWriterIncarnationResponse* resp) {
  absl::StatusOr<std::string> held =
      store_->PutWriterIncarnation(req->writer(), req->incarnation(), req->only_if_none());
  if (!held.ok()) return ToGrpc(held.status());
  resp->set_incarnation(std::move(*held));
  return grpc::Status::OK;
}

grpc::Status DataNodeService::Stats(grpc::ServerContext*, const v1::StatsRequest* req,
                                    v1::StatsResponse* resp) {
  if (req->writer() != 0) {
    resp->set_writer_high_water(store_->WriterHighWater(req->writer()));
    resp->set_writer_incarnation(store_->WriterIncarnation(req->writer()));
  }
  if (req->include_ring()) {
    auto [epoch, ring] = store_->Ring();
    resp->set_ring_epoch(epoch);
    resp->set_ring(std::move(ring));
  }
  if (req->include_vdis()) {
    for (v1::VdiGeometry& g : store_->Vdis()) {
      if (!store_->VdiComplete(g.vdi_id())) resp->add_incomplete_vdis(g.vdi_id());
      *resp->add_vdi_list() = std::move(g);
    }
  }
  const StoreStats s = store_->Stats();
  resp->set_node_id(node_id_);
  resp->set_client_ops(client_ops_.load(std::memory_order_relaxed));
  resp->set_control_term(store_->control_term());
  resp->set_blocks(s.blocks);
  resp->set_log_records(s.log_records);
  resp->set_log_bytes(s.log_bytes);
  resp->set_vdis(s.vdis);
  resp->set_device_failed(!s.device_error.empty());
  resp->set_device_error(s.device_error);
  resp->set_older_version_refusals(s.older_version_refusals);
  return grpc::Status::OK;
}

}  // namespace ringcache::datanode
