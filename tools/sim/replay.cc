// ringcache-sim replay: see replay.h.
#include "tools/sim/replay.h"

#include <grpcpp/grpcpp.h>
#include <libnbd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ringcache/v1/admin.grpc.pb.h"

namespace ringcache::sim {
namespace {

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
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::VdiStatsRequest req;
    req.set_vdi_name(v.export_name);
    v1::VdiStatsResponse resp;
    const grpc::Status s = stub->VdiStats(&ctx, req, &resp);
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

}  // namespace ringcache::sim
