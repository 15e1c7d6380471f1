// ringcache-sim replay: see replay.h.
#include "tools/sim/replay.h"

#include <grpcpp/grpcpp.h>
#include <libnbd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ring/ring.h"
#include "ringcache/v1/admin.grpc.pb.h"

namespace ringcache::sim {
namespace {

// A client context for one admin call, with the replay's 30 s deadline.
std::unique_ptr<grpc::ClientContext> AdminCall() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

constexpr uint32_t kMaxNbdRequest = 1u << 20;  // larger requests go as several of this size

std::string NbdError(const std::string& what) {
  const char* e = nbd_get_error();
  return absl::StrCat(what, ": ", e != nullptr ? e : "unknown libnbd error");
}

// One connected export; closes on destruction.
class Export {
 public:
  ~Export() {
    if (h_ != nullptr) {
      nbd_shutdown(h_, 0);
      nbd_close(h_);
    }
  }
  absl::Status Connect(const std::string& uri) {
    uri_ = uri;
    h_ = nbd_create();
    if (h_ == nullptr) return absl::InternalError(NbdError("nbd_create"));
    if (nbd_connect_uri(h_, uri.c_str()) == -1) {
      return absl::UnavailableError(NbdError(absl::StrCat("connect ", uri)));
    }
    const int64_t size = nbd_get_size(h_);
    if (size < 0) return absl::InternalError(NbdError(absl::StrCat("size of ", uri)));
    size_ = static_cast<uint64_t>(size);
    return absl::OkStatus();
  }
  uint64_t size() const { return size_; }
  absl::Status Do(const Request& r, std::string* buf) {
    uint64_t done = 0;
    while (done < r.length) {
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(r.length - done, kMaxNbdRequest));
      if (buf->size() < n) buf->resize(n, '\x5a');
      const uint64_t off = r.offset + done;
      const int rc = r.op == policy::Op::kWrite ? nbd_pwrite(h_, buf->data(), n, off, 0)
                                                : nbd_pread(h_, buf->data(), n, off, 0);
      if (rc == -1) {
        return absl::UnavailableError(NbdError(absl::StrCat(
            r.op == policy::Op::kWrite ? "write" : "read", " of ", n, " bytes at ", off, " on ",
            uri_)));
      }
      done += n;
    }
    return absl::OkStatus();
  }

 private:
  std::string uri_;
  nbd_handle* h_ = nullptr;
  uint64_t size_ = 0;
};

std::string ExportUri(const std::string& uri, uint32_t vdi) {
  return absl::StrReplaceAll(uri, {{"{vdi}", absl::StrCat(vdi)}});
}

std::string ExportName(const std::string& uri) {
  const size_t slash = uri.rfind('/');
  std::string name = slash == std::string::npos ? uri : uri.substr(slash + 1);
  return name.substr(0, name.find('?'));
}

// Adds the gateway's current counters of each VDI's export to `live` (sign -1: subtract).
absl::Status ReadLive(const std::string& gateway, std::vector<ReplayVdi>* vdis, int sign) {
  auto stub = v1::Admin::NewStub(grpc::CreateChannel(gateway, grpc::InsecureChannelCredentials()));
  for (ReplayVdi& v : *vdis) {
    v1::VdiStatsRequest req;
    req.set_vdi_name(v.export_name);
    v1::VdiStatsResponse resp;
    const grpc::Status s = stub->VdiStats(AdminCall().get(), req, &resp);
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat("stats of VDI ", v.export_name, " from gateway ",
                                                 gateway, ": ", s.error_message()));
    }
    for (const v1::VdiStatsEntry& e : resp.vdis()) {
      if (e.vdi_name() != v.export_name) continue;
      const v1::VdiCacheStats& x = e.stats();
      v.have_live = true;
      v.live_reads += sign * static_cast<int64_t>(x.reads());
      v.live_read_hits += sign * static_cast<int64_t>(x.hits_ram() + x.hits_ssd());
      v.live_ssd_writes += sign * static_cast<int64_t>(x.ssd_writes());
      v.live_policy = x.policy();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReplayResult> ReplayOverNbd(const SourceFactory& open,
                                           const ReplayOptions& options) {
  if (options.nbd_uri.empty()) return absl::InvalidArgumentError("--nbd URI is required");
  if (!(options.speed >= 0)) return absl::InvalidArgumentError("--speed must be >= 0");
  // Pass 1: the VDIs and the bytes each needs, so a small export fails before any I/O.
  std::vector<uint64_t> end_of;
  {
    auto src = open();
    if (!src.ok()) return src.status();
    std::vector<Request> batch(4096);
    uint64_t seen = 0;
    for (;;) {
      absl::StatusOr<size_t> n = (*src)->Read(absl::MakeSpan(batch));
      if (!n.ok()) return n.status();
      if (*n == 0) break;
      for (size_t i = 0; i < *n && (options.max_requests == 0 || seen < options.max_requests);
           ++i, ++seen) {
        const Request& r = batch[i];
        if (end_of.size() <= r.vdi) end_of.resize(r.vdi + 1, 0);
        end_of[r.vdi] = std::max(end_of[r.vdi], r.offset + r.length);
      }
      if (options.max_requests != 0 && seen >= options.max_requests) break;
    }
  }
  ReplayResult result;
  std::vector<std::unique_ptr<Export>> exports(end_of.size());
  for (uint32_t v = 0; v < end_of.size(); ++v) {
    ReplayVdi rv;
    rv.vdi = v;
    const std::string uri = ExportUri(options.nbd_uri, v);
    rv.export_name = ExportName(uri);
    result.vdis.push_back(rv);
    if (end_of[v] == 0) continue;
    exports[v] = std::make_unique<Export>();
    if (absl::Status s = exports[v]->Connect(uri); !s.ok()) return s;
    if (exports[v]->size() < end_of[v]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "export ", rv.export_name, " is ", exports[v]->size(), " bytes, the trace's VDI ", v,
          " reaches byte ", end_of[v], ": make it at least that large"));
    }
  }
  if (!options.gateway.empty()) {
    if (absl::Status s = ReadLive(options.gateway, &result.vdis, -1); !s.ok()) return s;
  }

  // Pass 2: the replay.
  auto src = open();
  if (!src.ok()) return src.status();
  std::vector<Request> batch(4096);
  std::string buf;
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  const uint64_t bs = options.block_size;
  for (;;) {
    absl::StatusOr<size_t> n = (*src)->Read(absl::MakeSpan(batch));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    for (size_t i = 0; i < *n; ++i) {
      if (options.max_requests != 0 && result.requests >= options.max_requests) break;
      const Request& r = batch[i];
      if (options.speed > 0) {
        const auto due = start + std::chrono::microseconds(static_cast<int64_t>(
                                     static_cast<double>(r.time_us) / options.speed));
        std::this_thread::sleep_until(due);
      }
      if (absl::Status s = exports[r.vdi]->Do(r, &buf); !s.ok()) return s;
      ReplayVdi& rv = result.vdis[r.vdi];
      ++rv.requests;
      const uint64_t blocks = (r.offset + r.length - 1) / bs - r.offset / bs + 1;
      (r.op == policy::Op::kWrite ? rv.write_blocks : rv.read_blocks) += blocks;
      ++result.requests;
      const auto now = std::chrono::steady_clock::now();
      if (options.progress && now - last_progress > std::chrono::seconds(1)) {
        last_progress = now;
        options.progress(absl::StrCat(result.requests, " requests replayed"));
      }
    }
    if (options.max_requests != 0 && result.requests >= options.max_requests) break;
  }
  result.wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  exports.clear();  // every reply is in: the counters below include the whole replay
  if (!options.gateway.empty()) {
    if (absl::Status s = ReadLive(options.gateway, &result.vdis, +1); !s.ok()) return s;
  }
  return result;
}

absl::StatusOr<ClusterLayout> ReadClusterLayout(const std::string& gateway,
                                                const std::vector<std::string>& exports) {
  auto stub = v1::Admin::NewStub(grpc::CreateChannel(gateway, grpc::InsecureChannelCredentials()));
  ClusterLayout layout;
  {
    v1::ClusterStatusResponse resp;
    const grpc::Status s = stub->ClusterStatus(AdminCall().get(), v1::ClusterStatusRequest(), &resp);
    if (!s.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cluster status from gateway ", gateway, ": ", s.error_message()));
    }
    for (const v1::RingMember& m : resp.cache_ring()) layout.ring.emplace_back(m.id(), m.weight());
    if (layout.ring.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gateway ", gateway, " reports no cache ring (a gateway older than ringcache-sim?)"));
    }
  }
  v1::ListVdisResponse resp;
  const grpc::Status s = stub->ListVdis(AdminCall().get(), v1::ListVdisRequest(), &resp);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("VDI list from gateway ", gateway, ": ", s.error_message()));
  }
  layout.vdi_ids.assign(exports.size(), 0);
  layout.object_sizes.assign(exports.size(), 0);
  for (size_t v = 0; v < exports.size(); ++v) {
    if (exports[v].empty()) continue;
    bool found = false;
    for (const v1::VdiGeometry& g : resp.vdis()) {
      if (g.name() != exports[v]) continue;
      layout.vdi_ids[v] = g.vdi_id();
      layout.object_sizes[v] = g.object_size();
      found = true;
    }
    if (!found) {
      return absl::NotFoundError(
          absl::StrCat("gateway ", gateway, " has no VDI named ", exports[v]));
    }
  }
  return layout;
}

absl::StatusOr<ShardedPolicy::Route> RingRoute(const ClusterLayout& layout, uint32_t block_size) {
  std::vector<ring::Member> members;
  for (const auto& [id, weight] : layout.ring) members.push_back(ring::Member{id, weight, ""});
  absl::StatusOr<ring::Ring> built = ring::Ring::BuildCacheRing(std::move(members));
  if (!built.ok()) return built.status();
  auto ring = std::make_shared<const ring::Ring>(*std::move(built));
  absl::flat_hash_map<uint32_t, size_t> index;
  for (size_t i = 0; i < layout.ring.size(); ++i) index[layout.ring[i].first] = i;
  std::vector<uint64_t> blocks_per_object(layout.object_sizes.size(), 1);
  for (size_t v = 0; v < layout.object_sizes.size(); ++v) {
    if (layout.object_sizes[v] != 0) blocks_per_object[v] = layout.object_sizes[v] / block_size;
    if (blocks_per_object[v] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace VDI ", v, ": object size ", layout.object_sizes[v], " below the block size"));
    }
  }
  const std::vector<uint32_t> ids = layout.vdi_ids;
  return ShardedPolicy::Route(
      [ring, index = std::move(index), ids, blocks_per_object](const policy::BlockKey& key) {
        const uint32_t v = static_cast<uint32_t>(key.vdi);
        const ring::NodeId owner =
            ring->Owner(ring::ObjectKey{ids[v], key.block / blocks_per_object[v]});
        return index.at(owner);
      });
}

}  // namespace ringcache::sim
