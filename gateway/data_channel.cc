#include "gateway/data_channel.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_tls.h"
#include "common/socket.h"

namespace ringcache::gateway {
namespace {
constexpr size_t kMaxIdle = 64;
}  // namespace

DataChannel::DataChannel(std::string host, int port, int timeout_ms,
                         std::shared_ptr<const tls::ClientContext> tls)
    : host_(std::move(host)), port_(port), timeout_ms_(timeout_ms), tls_(std::move(tls)) {}

DataChannel::~DataChannel() {
  absl::MutexLock l(&mu_);
  for (int fd : idle_) CloseLocked(fd);
  for (int fd : busy_) CloseLocked(fd);
}

std::shared_ptr<const tls::ClientContext> DataChannel::ProcessTls() {
  static absl::Mutex mu;
  static std::shared_ptr<const tls::ClientContext>* ctx ABSL_GUARDED_BY(mu) = nullptr;
  static const tls::Identity* made_for ABSL_GUARDED_BY(mu) = nullptr;
  std::shared_ptr<const tls::Identity> id = tls::ProcessIdentity();
  if (id == nullptr) return nullptr;
  absl::MutexLock l(&mu);
  if (ctx == nullptr || made_for != id.get()) {
    absl::StatusOr<std::shared_ptr<const tls::ClientContext>> c =
        tls::ClientContext::Create(id, tls::kRoleCacheNode);
    if (!c.ok()) return nullptr;  // LoadIdentity checked these credentials already
    delete ctx;
    ctx = new std::shared_ptr<const tls::ClientContext>(*std::move(c));
    made_for = id.get();
  }
  return *ctx;
}

void DataChannel::CloseLocked(int fd) {
  sessions_.erase(fd);
  close(fd);
}

std::string DataChannel::address() const { return absl::StrCat(host_, ":", port_); }

absl::StatusOr<int> DataChannel::Acquire(bool fresh, bool* reused) {
  {
    absl::MutexLock l(&mu_);
    if (fresh) {
      // The node closed a pooled connection (it restarted, most likely): the others are
      // from the same past.
      for (int fd : idle_) CloseLocked(fd);
      idle_.clear();
    } else if (!idle_.empty()) {
      const int fd = idle_.back();
      idle_.pop_back();
      busy_.insert(fd);
      *reused = true;
      return fd;
    }
  }
  *reused = false;
  absl::StatusOr<int> fd =
      DialTcp(host_, port_, absl::Milliseconds(std::min(timeout_ms_, 2000)));
  if (!fd.ok()) return fd.status();
  // Answers are read with blocking receives (one call each) that give up after the timeout.
  SetReceiveTimeout(*fd, absl::Milliseconds(timeout_ms_));
  std::unique_ptr<tls::Session> session;
  if (tls_ != nullptr) {
    absl::StatusOr<std::unique_ptr<tls::Session>> s =
        tls_->Connect(*fd, absl::Milliseconds(std::min(timeout_ms_, 5000)));
    if (!s.ok()) {
      close(*fd);
      return absl::UnavailableError(
          absl::StrCat("TLS to cache node at ", address(), ": ", s.status().message()));
    }
    session = *std::move(s);
  }
  absl::MutexLock l(&mu_);
  busy_.insert(*fd);
  if (session != nullptr) sessions_[*fd] = std::move(session);
  return *fd;
}

void DataChannel::Release(int fd, bool keep) {
  absl::MutexLock l(&mu_);
  busy_.erase(fd);
  if (keep && idle_.size() < kMaxIdle) {
    idle_.push_back(fd);
  } else {
    CloseLocked(fd);
  }
}

void DataChannel::CancelInFlight() {
  absl::MutexLock l(&mu_);
  ++cancels_;
  for (int fd : busy_) shutdown(fd, SHUT_RDWR);
}

absl::Status DataChannel::Exchange(int fd, const wire::Request& r, const char* payload,
                                   char* out, bool* answered, absl::Status* result) {
  *answered = false;
  tls::Session* session = nullptr;
  if (tls_ != nullptr) {
    absl::MutexLock l(&mu_);
    auto it = sessions_.find(fd);
    if (it == sessions_.end()) return absl::UnavailableError("connection without TLS session");
    session = it->second.get();
  }
  char head[wire::kRequestBytes];
  wire::EncodeRequest(r, head);
  iovec iov[2] = {{head, sizeof(head)},
                  {const_cast<char*>(payload), r.op == wire::Op::kWrite ? r.length : 0}};
  if (absl::Status s = tls::WriteFullVOn(fd, session, iov, 2); !s.ok()) return s;
  // Unbounded here: the socket's receive timeout bounds each read (SetReceiveTimeout).
  char rhead[wire::kResponseBytes];
  bool eof_at_start = false;
  if (absl::Status s = tls::ReadFullOn(fd, session, rhead, sizeof(rhead), &eof_at_start);
      !s.ok()) {
    *answered = !eof_at_start && !absl::IsDeadlineExceeded(s);
    return s;
  }
  *answered = true;
  wire::Response resp;
  if (absl::Status s = wire::DecodeResponse(rhead, &resp); !s.ok()) return s;
  std::string message(resp.message_len, '\0');
  if (absl::Status s = tls::ReadFullOn(fd, session, message.data(), message.size()); !s.ok()) {
    return s;
  }
  const uint32_t expect = resp.code == absl::StatusCode::kOk && r.op == wire::Op::kRead
                              ? r.length
                              : 0;
  if (resp.data_len != expect) {
    return absl::DataLossError(absl::StrCat("answer of ", resp.data_len, " bytes, expected ",
                                            expect));
  }
  if (expect > 0) {
    if (absl::Status s = tls::ReadFullOn(fd, session, out, expect); !s.ok()) return s;
  }
  *result = wire::ToStatus(resp, message);
  return absl::OkStatus();
}

absl::Status DataChannel::Call(const wire::Request& r, const char* payload, char* out,
                               bool* sent) {
  *sent = false;
  uint64_t cancels_before;
  {
    absl::MutexLock l(&mu_);
    cancels_before = cancels_;
  }
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    absl::StatusOr<int> fd = Acquire(/*fresh=*/attempt > 0, &reused);
    if (!fd.ok()) return fd.status();
    bool answered = false;
    absl::Status result;
    const absl::Status transport = Exchange(*fd, r, payload, out, &answered, &result);
    Release(*fd, transport.ok());  // a broken or half-read connection is closed
    if (transport.ok()) {
      *sent = true;
      return result;
    }
    {
      absl::MutexLock l(&mu_);
      if (cancels_ != cancels_before) {
        *sent = true;
        return absl::CancelledError(absl::StrCat("call to ", address(), " cancelled"));
      }
    }
    // A reused connection the node had closed (it restarted) before reading the request: try
    // once more on a fresh one.
    if (reused && !answered && attempt == 0 && !absl::IsDeadlineExceeded(transport)) continue;
    *sent = true;
    if (absl::IsDeadlineExceeded(transport)) {
      return absl::DeadlineExceededError(
          absl::StrCat("block data call to ", address(), ": ", transport.message()));
    }
    return absl::UnavailableError(
        absl::StrCat("block data call to ", address(), ": ", transport.message()));
  }
}

}  // namespace ringcache::gateway
