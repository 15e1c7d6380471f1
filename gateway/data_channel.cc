#include "gateway/data_channel.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_tls.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/stream_reader.h"

namespace ringcache::gateway {
namespace {
constexpr size_t kMaxIdle = 64;
}  // namespace

// The pipelined connection: requests go out in the order they are queued (a caller that finds
// a send under way leaves its frame to that sender, so a burst of reads shares sends), each
// tagged and flagged kMayReorder; a reader thread matches answers to requests by tag (a read
// the node fetches from the data nodes answers after the cached ones behind it) and runs the
// completions. Under TLS the session is shared the one way GnuTLS allows: one thread sending (the
// sender of the moment, under `sending_`) and one receiving (the reader); it is never
// renegotiated, and the connection ends by shutting the socket down, not by a TLS close.
class DataChannel::Pipe {
 public:
  Pipe(int fd, std::unique_ptr<tls::Session> session, std::string address, int timeout_ms)
      : fd_(fd),
        session_(std::move(session)),
        address_(std::move(address)),
        timeout_(absl::Milliseconds(timeout_ms)) {
    // The reader wakes at least every 250 ms to look at the oldest request's deadline.
    SetReceiveTimeout(fd_, absl::Milliseconds(250));
    const timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    reader_ = std::thread([this] { ReaderLoop(); });
  }
  // REQUIRES: not run by a completion (it joins the reader thread).
  ~Pipe() {
    Break(absl::CancelledError(absl::StrCat("block data pipe to ", address_, " closed")));
    reader_.join();
    session_.reset();  // before its socket
    close(fd_);
  }

  bool Submit(const wire::Request& r, char* out, absl::AnyInvocable<void(absl::Status)> done) {
    absl::MutexLock l(&mu_);
    if (broken_) return false;
    wire::Request tagged = r;
    tagged.flags |= wire::kMayReorder;
    tagged.tag = ++last_tag_;
    char head[wire::kRequestBytes];
    wire::EncodeRequest(tagged, head);
    queued_.append(head, sizeof(head));
    pending_.emplace(tagged.tag, Slot{out, r.length, absl::Now() + timeout_, std::move(done)});
    if (sending_) return true;  // the sender under way takes this frame too
    sending_ = true;
    while (!queued_.empty() && !broken_) {
      std::string batch;
      batch.swap(queued_);
      mu_.Unlock();
      iovec iov{batch.data(), batch.size()};
      const absl::Status s = tls::WriteFullVOn(fd_, session_.get(), &iov, 1);
      mu_.Lock();
      if (!s.ok())
        BreakLocked(absl::UnavailableError(
            absl::StrCat("block data pipe to ", address_, ": ", s.message())));
    }
    sending_ = false;
    return true;  // a failed send broke the pipe: the reader fails the request
  }
  // Ends the connection: every request still waiting gets `why`.
  void Break(absl::Status why) {
    absl::MutexLock l(&mu_);
    BreakLocked(std::move(why));
  }
  bool broken() const {
    absl::MutexLock l(&mu_);
    return broken_;
  }

 private:
  struct Slot {
    char* out;
    uint32_t length;
    absl::Time deadline;
    absl::AnyInvocable<void(absl::Status)> done;
  };

  void BreakLocked(absl::Status why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_) return;
    broken_ = true;
    why_ = std::move(why);
    shutdown(fd_, SHUT_RDWR);  // the reader sees the end
  }

  // Waits until `n` bytes are buffered. OK, or why the connection is done.
  absl::Status Fill(size_t n) {
    // The socket's receive timeout (250 ms) wakes the reader to look at the deadlines.
    auto on_timeout = [this]() -> absl::Status {
      absl::MutexLock l(&mu_);
      if (broken_) return why_;
      if (!pending_.empty() && absl::Now() > pending_.begin()->second.deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("block data pipe to ", address_, ": no answer in time"));
      }
      return absl::OkStatus();
    };
    absl::Status s = in_.FillTo(n, on_timeout);
    if (s.ok() || absl::IsDeadlineExceeded(s)) return s;
    {
      absl::MutexLock l(&mu_);
      if (broken_) return why_;
    }
    return absl::UnavailableError(
        absl::StrCat("block data pipe to ", address_, ": connection lost"));
  }

  absl::Status ReadOne() {
    RC_RETURN_IF_ERROR(Fill(wire::kResponseBytes));
    wire::Response resp;
    RC_RETURN_IF_ERROR(wire::DecodeResponse(in_.data(), &resp));
    in_.Consume(wire::kResponseBytes);
    Slot slot;
    {
      absl::MutexLock l(&mu_);
      auto it = pending_.find(resp.tag);
      if (it == pending_.end()) {
        return absl::DataLossError(absl::StrCat("answer to no request (tag ", resp.tag, ")"));
      }
      slot = std::move(it->second);
      pending_.erase(it);
    }
    absl::Status transport = Fill(resp.message_len);
    std::string message;
    if (transport.ok()) {
      message.assign(in_.data(), resp.message_len);
      in_.Consume(resp.message_len);
      const uint32_t expect = resp.code == absl::StatusCode::kOk ? slot.length : 0;
      if (resp.data_len != expect) {
        transport = absl::DataLossError(
            absl::StrCat("answer of ", resp.data_len, " bytes, expected ", expect));
      }
    }
    if (transport.ok() && resp.data_len > 0) {
      transport = in_.ReadTo(slot.out, resp.data_len, slot.deadline);
    }
    if (!transport.ok()) {
      slot.done(transport);
      return transport;
    }
    slot.done(wire::ToStatus(resp, message));
    return absl::OkStatus();
  }

  void ReaderLoop() {
    absl::Status end;
    do {
      end = ReadOne();
    } while (end.ok());
    std::map<uint64_t, Slot> left;
    {
      absl::MutexLock l(&mu_);
      BreakLocked(end);
      left.swap(pending_);
      end = why_;
    }
    for (auto& [tag, s] : left) s.done(end);
  }

  const int fd_;
  std::unique_ptr<tls::Session> session_;  // null: plaintext
  const std::string address_;
  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  // By tag; tags only grow, so the first is the oldest request waiting.
  std::map<uint64_t, Slot> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t last_tag_ ABSL_GUARDED_BY(mu_) = 0;
  std::string queued_ ABSL_GUARDED_BY(mu_);  // frames not sent yet
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
  StreamReader in_{fd_, session_.get(), 256 << 10};  // the reader's
  std::thread reader_;
};

DataChannel::DataChannel(std::string host, int port, int timeout_ms,
                         std::shared_ptr<const tls::ClientContext> tls)
    : host_(std::move(host)), port_(port), timeout_ms_(timeout_ms), tls_(std::move(tls)) {}

DataChannel::~DataChannel() {
  std::shared_ptr<Pipe> pipe;
  {
    absl::MutexLock l(&mu_);
    pipe.swap(pipe_);
  }
  pipe.reset();  // its requests in flight complete now (cancelled)
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
  std::unique_ptr<tls::Session> session;
  absl::StatusOr<int> fd = Dial(&session);
  if (!fd.ok()) return fd.status();
  // Answers are read with blocking receives (one call each) that give up after the timeout.
  SetReceiveTimeout(*fd, absl::Milliseconds(timeout_ms_));
  absl::MutexLock l(&mu_);
  busy_.insert(*fd);
  if (session != nullptr) sessions_[*fd] = std::move(session);
  return *fd;
}

absl::StatusOr<int> DataChannel::Dial(std::unique_ptr<tls::Session>* session) const {
  absl::StatusOr<int> fd = DialTcp(host_, port_, absl::Milliseconds(std::min(timeout_ms_, 2000)));
  if (!fd.ok() || tls_ == nullptr) return fd;
  absl::StatusOr<std::unique_ptr<tls::Session>> s =
      tls_->Connect(*fd, absl::Milliseconds(std::min(timeout_ms_, 5000)));
  if (!s.ok()) {
    close(*fd);
    return absl::UnavailableError(
        absl::StrCat("TLS to cache node at ", address(), ": ", s.status().message()));
  }
  *session = *std::move(s);
  return fd;
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

bool DataChannel::ReadAsync(const wire::Request& r, char* out,
                            absl::AnyInvocable<void(absl::Status)> done) {
  std::shared_ptr<Pipe> pipe;
  {
    absl::MutexLock l(&mu_);
    pipe = pipe_;
  }
  return pipe != nullptr && pipe->Submit(r, out, std::move(done));
}

void DataChannel::MaybeOpenPipe() {
  {
    absl::MutexLock l(&mu_);
    if ((pipe_ != nullptr && !pipe_->broken()) || opening_pipe_ || absl::Now() < next_pipe_) {
      return;
    }
    opening_pipe_ = true;
    next_pipe_ = absl::Now() + absl::Seconds(1);
  }
  std::unique_ptr<tls::Session> session;
  // A failure is left to the single connections' reads, which report it.
  absl::StatusOr<int> fd = Dial(&session);
  std::shared_ptr<Pipe> old;  // a broken one, let go after mu_: its reader is ending
  absl::MutexLock l(&mu_);
  opening_pipe_ = false;
  if (!fd.ok()) return;
  old = std::move(pipe_);
  pipe_ = std::make_shared<Pipe>(*fd, std::move(session), address(), timeout_ms_);
}

void DataChannel::CancelInFlight() {
  std::shared_ptr<Pipe> pipe;
  {
    absl::MutexLock l(&mu_);
    pipe.swap(pipe_);
  }
  if (pipe != nullptr)
    pipe->Break(absl::CancelledError(absl::StrCat("call to ", address(), " cancelled")));
  absl::MutexLock l(&mu_);
  ++cancels_;
  for (int fd : busy_) shutdown(fd, SHUT_RDWR);
}

absl::Status DataChannel::Exchange(int fd, const wire::Request& r, const char* payload, char* out,
                                   bool* answered, absl::Status* result) {
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
  if (absl::Status s = tls::ReadFullOn(fd, session, rhead, sizeof(rhead), &eof_at_start); !s.ok()) {
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
  const uint32_t expect =
      resp.code == absl::StatusCode::kOk && r.op == wire::Op::kRead ? r.length : 0;
  if (resp.data_len != expect) {
    return absl::DataLossError(
        absl::StrCat("answer of ", resp.data_len, " bytes, expected ", expect));
  }
  if (expect > 0) {
    if (absl::Status s = tls::ReadFullOn(fd, session, out, expect); !s.ok()) return s;
  }
  *result = wire::ToStatus(resp, message);
  return absl::OkStatus();
}

absl::Status DataChannel::Call(const wire::Request& r, const char* payload, char* out, bool* sent) {
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
      if (r.op == wire::Op::kRead && result.ok()) MaybeOpenPipe();
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
