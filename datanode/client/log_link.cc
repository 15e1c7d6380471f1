#include "datanode/client/log_link.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/block_wire.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace ringcache::datanode {

LogLink::LogLink(uint32_t node_id, std::string host, int timeout_ms)
    : node_id_(node_id), host_(std::move(host)), timeout_ms_(timeout_ms) {}

LogLink::~LogLink() {
  std::unique_ptr<TaskPool> sender;
  {
    absl::MutexLock l(&mu_);
    closing_ = true;
    sender.swap(sender_);
  }
  sender.reset();  // runs what is queued, then joins
  absl::MutexLock l(&io_mu_);
  Close();
}

void LogLink::SetPort(int port, const std::string& store_incarnation, uint32_t api_version) {
  absl::MutexLock l(&mu_);
  incarnation_ = store_incarnation;
  api_version_ = api_version;
  if (port != 0 && (port != port_ || parked_)) {
    spdlog::info("data node {}: log appends on its log port {}:{}", node_id_, host_, port);
  }
  port_ = port;
  parked_ = false;
}

bool LogLink::usable() const {
  absl::MutexLock l(&mu_);
  return port_ != 0 && !parked_;
}

bool LogLink::stores_blocks() const {
  absl::MutexLock l(&mu_);
  // node-api 2 added kStoreBlocks (common/formats.h).
  return port_ != 0 && !parked_ && api_version_ >= 2;
}

bool LogLink::stores_batches() const {
  absl::MutexLock l(&mu_);
  // node-api 3 added kStoreBlocksBatch (common/formats.h).
  return port_ != 0 && !parked_ && api_version_ >= 3;
}

int LogLink::Target(std::string* store_incarnation, bool* closing) const {
  absl::MutexLock l(&mu_);
  *store_incarnation = incarnation_;
  if (closing != nullptr) *closing = closing_;
  return port_;
}

TaskPool* LogLink::Sender() {
  absl::MutexLock l(&mu_);
  if (closing_) return nullptr;
  if (sender_ == nullptr) sender_ = std::make_unique<TaskPool>(1);
  return sender_.get();
}

void LogLink::Send(const v1::LogAppendRequest* req, v1::LogAppendResponse* resp,
                   absl::AnyInvocable<void(absl::Status)> done) {
  TaskPool* sender = Sender();
  if (sender == nullptr) {
    done(absl::CancelledError("log link closing"));
    return;
  }
  sender->Submit([this, req, resp, done = std::move(done)]() mutable { done(Call(*req, resp)); });
}

bool LogLink::TrySendStore(const v1::WriteBlocksRequest* req, v1::WriteBlocksResponse* resp,
                           absl::AnyInvocable<void(absl::Status)> done) {
  TaskPool* sender = Sender();
  if (sender == nullptr) return false;
  {
    absl::MutexLock l(&mu_);
    if (queued_ > 0) return false;
    ++queued_;
  }
  sender->Submit([this, req, resp, done = std::move(done)]() mutable {
    absl::Status s = CallStore(*req, resp);
    {
      absl::MutexLock l(&mu_);
      --queued_;
    }
    done(std::move(s));
  });
  return true;
}

void LogLink::Close() {
  session_.reset();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  fd_port_ = 0;
}

absl::Status LogLink::Connect(int port) {
  Close();
  absl::StatusOr<int> fd = DialTcp(host_, port, absl::Milliseconds(std::min(timeout_ms_, 2000)));
  if (!fd.ok()) return fd.status();
  SetReceiveTimeout(*fd, absl::Milliseconds(timeout_ms_));
  const timeval tv{timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000};
  setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  // A peer that vanished (its host cut off the network) fails the connection within seconds
  // rather than at the answer's timeout: data unacknowledged for 10 s aborts it, and an idle one
  // is probed after 10 s (as the gRPC channel's pings, kDataNodeKeepaliveMs). A stopped process
  // still has its kernel acknowledge: that waits for the answer's timeout, as over gRPC.
  const int on = 1, idle_s = 10, interval_s = 5, probes = 2;
  const unsigned user_timeout_ms = 10000;
  setsockopt(*fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(*fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  setsockopt(*fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  setsockopt(*fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
  setsockopt(*fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
  if (std::shared_ptr<const tls::Identity> id = tls::ProcessIdentity(); id != nullptr) {
    absl::StatusOr<std::shared_ptr<const tls::ClientContext>> ctx =
        tls::ClientContext::Create(id, tls::kRoleDataNode);
    absl::StatusOr<std::unique_ptr<tls::Session>> s =
        ctx.ok() ? (*ctx)->Connect(*fd, absl::Milliseconds(std::min(timeout_ms_, 5000)))
                 : absl::StatusOr<std::unique_ptr<tls::Session>>(ctx.status());
    if (!s.ok()) {
      close(*fd);
      return absl::UnavailableError(absl::StrCat("TLS: ", s.status().message()));
    }
    session_ = *std::move(s);
  }
  fd_ = *fd;
  fd_port_ = port;
  return absl::OkStatus();
}

absl::Status LogLink::SendRequest(wire::Op op, const std::string& payload, uint64_t* tag) {
  wire::Request r;
  r.op = op;
  r.length = static_cast<uint32_t>(payload.size());
  r.timeout_ms = static_cast<uint32_t>(timeout_ms_);
  r.tag = *tag = ++tag_;
  char head[wire::kRequestBytes];
  wire::EncodeRequest(r, head);
  iovec iov[2] = {{head, sizeof(head)}, {const_cast<char*>(payload.data()), payload.size()}};
  return tls::WriteFullVOn(fd_, session_.get(), iov, 2);
}

absl::Status LogLink::ReadAnswer(wire::Op op, uint64_t tag, std::string* data, bool* answered,
                                 absl::Status* result) {
  *answered = false;
  char rhead[wire::kResponseBytes];
  bool eof_at_start = false;
  if (absl::Status s = tls::ReadFullOn(fd_, session_.get(), rhead, sizeof(rhead), &eof_at_start);
      !s.ok()) {
    *answered = !eof_at_start && !absl::IsDeadlineExceeded(s);
    return s;
  }
  *answered = true;
  wire::Response a;
  if (absl::Status s = wire::DecodeResponse(rhead, &a); !s.ok()) return s;
  if (a.tag != tag) return absl::DataLossError(absl::StrCat("answer to tag ", a.tag));
  if (a.data_len > (op == wire::Op::kLoadBlocks ? wire::kMaxLength : wire::kMaxMessage)) {
    return absl::DataLossError(absl::StrCat("answer of ", a.data_len, " bytes"));
  }
  std::string message(a.message_len, '\0');
  data->resize(a.data_len);
  if (absl::Status s = tls::ReadFullOn(fd_, session_.get(), message.data(), message.size());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = tls::ReadFullOn(fd_, session_.get(), data->data(), data->size());
      !s.ok()) {
    return s;
  }
  *result = wire::ToStatus(a, message);
  return absl::OkStatus();
}

absl::Status LogLink::Exchange(wire::Op op, const std::string& payload, std::string* data,
                               bool* answered, absl::Status* result) {
  *answered = false;
  uint64_t tag = 0;
  RC_RETURN_IF_ERROR(SendRequest(op, payload, &tag));
  return ReadAnswer(op, tag, data, answered, result);
}

void LogLink::EncodeAppend(const v1::LogAppendRequest& req, const std::string& incarnation) {
  req.SerializeToString(&payload_);
  if (!incarnation.empty()) {
    // Serialized messages concatenate as a merge: the caller's request (shared, const) gains
    // the field without a copy of its records.
    v1::LogAppendRequest expect;
    expect.set_expect_store_incarnation(incarnation);
    payload_ += expect.SerializeAsString();
  }
}

namespace {
absl::Status Busy() { return absl::UnavailableError("log link busy with a begun append"); }
}  // namespace

absl::Status LogLink::Call(const v1::LogAppendRequest& req, v1::LogAppendResponse* resp) {
  std::string incarnation;
  const int port = Target(&incarnation);
  if (port == 0) return absl::UnavailableError("no log port known");
  absl::MutexLock l(&io_mu_);
  if (begun()) return Busy();
  EncodeAppend(req, incarnation);
  RC_RETURN_IF_ERROR(RoundTrip(wire::Op::kLogAppend, port, &data_));
  if (!resp->ParseFromString(data_)) {
    return absl::DataLossError("a log append answer that does not parse");
  }
  return absl::OkStatus();
}

absl::Status LogLink::BeginOp(wire::Op op, int port) {
  for (int attempt = 0;; ++attempt) {
    const bool reused = fd_ >= 0 && fd_port_ == port;
    absl::Status transport = reused ? absl::OkStatus() : Connect(port);
    if (transport.ok()) transport = SendRequest(op, payload_, &begun_tag_);
    if (transport.ok()) {
      begun_port_ = port;  // the connection is this request's until its Finish
      begun_reused_ = reused;
      return absl::OkStatus();
    }
    Close();
    // A kept connection the node closed (it restarted): once more on a fresh one.
    if (reused && attempt == 0 && !absl::IsDeadlineExceeded(transport)) continue;
    return Park(port, transport);
  }
}

absl::Status LogLink::FinishOp(wire::Op op) {
  const int port = std::exchange(begun_port_, 0);
  bool answered = false;
  absl::Status result;
  absl::Status transport = ReadAnswer(op, begun_tag_, &data_, &answered, &result);
  if (!transport.ok()) {
    Close();
    // A kept connection the node closed before it read the request: the whole request once
    // more on a fresh one (RoundTrip parks the link if that fails too). Both ops are
    // idempotent (an append of the same records, a stamped write).
    result = begun_reused_ && !answered && !absl::IsDeadlineExceeded(transport)
                 ? RoundTrip(op, port, &data_)
                 : Park(port, transport);
  }
  if (payload_.capacity() > (4u << 20)) std::string().swap(payload_);  // not kept
  return result;
}

absl::Status LogLink::BeginCall(const v1::LogAppendRequest& req) {
  std::string incarnation;
  bool closing = false;
  const int port = Target(&incarnation, &closing);
  if (port == 0 || closing) return absl::UnavailableError("no log port known");
  absl::MutexLock l(&io_mu_);
  if (begun()) return Busy();
  EncodeAppend(req, incarnation);
  return BeginOp(wire::Op::kLogAppend, port);
}

absl::Status LogLink::FinishCall(v1::LogAppendResponse* resp) {
  absl::MutexLock l(&io_mu_);
  if (!begun()) return absl::FailedPreconditionError("FinishCall without a begun append");
  absl::Status result = FinishOp(wire::Op::kLogAppend);
  if (result.ok() && !resp->ParseFromString(data_)) {
    result = absl::DataLossError("a log append answer that does not parse");
  }
  return result;
}

bool LogLink::TryBeginBlocks(wire::Op op, const google::protobuf::MessageLite& req,
                             absl::Status* status) {
  std::string incarnation;
  bool closing = false;
  const int port = Target(&incarnation, &closing);
  if (port == 0 || closing) return false;
  {
    absl::MutexLock m(&mu_);
    if (queued_ > 0) return false;  // TrySendStore's write, or another begun one
    ++queued_;
  }
  auto give_back = [this] {
    absl::MutexLock m(&mu_);
    --queued_;
  };
  if (!io_mu_.TryLock()) {
    give_back();
    return false;
  }
  if (begun()) {
    io_mu_.Unlock();
    give_back();
    return false;
  }
  payload_ = wire::EncodeStorePrefix(incarnation);
  *status = req.AppendToString(&payload_) ? BeginOp(op, port)
                                          : absl::InternalError("a block write not serialized");
  io_mu_.Unlock();
  if (!status->ok()) give_back();  // over: no FinishBlocks follows
  return true;
}

absl::Status LogLink::FinishBlocks(wire::Op op, google::protobuf::MessageLite* resp) {
  absl::Status result;
  {
    absl::MutexLock l(&io_mu_);
    if (!begun()) return absl::FailedPreconditionError("FinishStore without a begun write");
    result = FinishOp(op);
    if (result.ok() && !resp->ParseFromString(data_)) {
      result = absl::DataLossError("a block write answer that does not parse");
    }
  }
  absl::MutexLock m(&mu_);
  --queued_;
  return result;
}

bool LogLink::TryBeginStore(const v1::WriteBlocksRequest& req, absl::Status* status) {
  return TryBeginBlocks(wire::Op::kStoreBlocks, req, status);
}

absl::Status LogLink::FinishStore(v1::WriteBlocksResponse* resp) {
  return FinishBlocks(wire::Op::kStoreBlocks, resp);
}

bool LogLink::TryBeginStoreBatch(const v1::WriteBlocksBatchRequest& req, absl::Status* status) {
  return TryBeginBlocks(wire::Op::kStoreBlocksBatch, req, status);
}

absl::Status LogLink::FinishStoreBatch(v1::WriteBlocksBatchResponse* resp) {
  return FinishBlocks(wire::Op::kStoreBlocksBatch, resp);
}

absl::Status LogLink::CallStore(const v1::WriteBlocksRequest& req,
                                v1::WriteBlocksResponse* resp) {
  std::string incarnation;
  const int port = Target(&incarnation);
  if (port == 0) return absl::UnavailableError("no log port known");
  absl::MutexLock l(&io_mu_);
  if (begun()) return Busy();
  payload_ = wire::EncodeStorePrefix(incarnation);
  if (!req.AppendToString(&payload_)) return absl::InternalError("a block write not serialized");
  RC_RETURN_IF_ERROR(RoundTrip(wire::Op::kStoreBlocks, port, &data_));
  if (!resp->ParseFromString(data_)) {
    return absl::DataLossError("a block write answer that does not parse");
  }
  return absl::OkStatus();
}

bool LogLink::TryCallLoad(const v1::ReadBlocksRequest& req, v1::ReadBlocksResponse* resp,
                          absl::Status* status) {
  std::string incarnation;
  bool closing = false;
  const int port = Target(&incarnation, &closing);
  if (port == 0 || closing || !io_mu_.TryLock()) return false;
  if (begun()) {
    io_mu_.Unlock();
    return false;
  }
  payload_ = wire::EncodeStorePrefix(incarnation);
  if (!req.AppendToString(&payload_)) {
    *status = absl::InternalError("a block read not serialized");
  } else {
    *status = RoundTrip(wire::Op::kLoadBlocks, port, &data_);
    if (status->ok() && !resp->ParseFromString(data_)) {
      *status = absl::DataLossError("a block read answer that does not parse");
    }
  }
  if (data_.capacity() > (4u << 20)) std::string().swap(data_);  // not kept
  io_mu_.Unlock();
  return true;
}

absl::Status LogLink::RoundTrip(wire::Op op, int port, std::string* data) {
  struct Shrink {  // a large request's buffer is not kept (after the second attempt's use)
    std::string* s;
    ~Shrink() {
      if (s->capacity() > (4u << 20)) std::string().swap(*s);
    }
  } shrink{&payload_};
  for (int attempt = 0;; ++attempt) {
    const bool reused = fd_ >= 0 && fd_port_ == port;
    absl::Status transport = reused ? absl::OkStatus() : Connect(port);
    bool answered = false;
    absl::Status result;
    if (transport.ok()) transport = Exchange(op, payload_, data, &answered, &result);
    if (transport.ok()) return result;  // the node's answer, a refusal included
    Close();
    // A kept connection the node closed (it restarted) before it read the request: once more
    // on a fresh one.
    if (reused && !answered && attempt == 0 && !absl::IsDeadlineExceeded(transport)) continue;
    return Park(port, transport);
  }
}

absl::Status LogLink::Park(int port, const absl::Status& transport) {
  {
    absl::MutexLock m(&mu_);
    if (!parked_ && port_ == port) {
      parked_ = true;
      spdlog::warn("data node {}: log port {}:{} failed ({}); its requests go over gRPC until "
                   "the node announces its port again",
                   node_id_, host_, port, std::string(transport.message()));
    }
  }
  return absl::UnavailableError(absl::StrCat("log port of data node ", node_id_, " at ", host_,
                                             ":", port, ": ", transport.message()));
}

}  // namespace ringcache::datanode
