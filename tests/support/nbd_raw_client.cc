// Test support: blocking raw-socket NBD client; see nbd_raw_client.h.
#include "tests/support/nbd_raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ringcache::testing {

namespace nbd = gateway::nbd;

std::string NbdOption(uint32_t option, const std::string& data) {
  std::string out;
  nbd::PutU64(&out, nbd::kOptionMagic);
  nbd::PutU32(&out, option);
  nbd::PutU32(&out, static_cast<uint32_t>(data.size()));
  out += data;
  return out;
}

NbdRawClient::~NbdRawClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool NbdRawClient::Connect(int port, double timeout_s, const char* from) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  timeval tv{};
  tv.tv_sec = static_cast<long>(timeout_s);
  tv.tv_usec = static_cast<long>((timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (from != nullptr) {
    if (inet_pton(AF_INET, from, &addr.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return false;
    }
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

bool NbdRawClient::SendRaw(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool NbdRawClient::RecvExact(size_t n, std::string* out) {
  out->assign(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd_, out->data() + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

bool NbdRawClient::WaitClosed() {
  char buf[4096];
  while (true) {
    const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
    if (r == 0) return true;
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno == ECONNRESET || errno == EPIPE;  // EAGAIN: timed out, still open
    }
  }
}

bool NbdRawClient::OptionReply(uint32_t* type, std::string* data) {
  std::string h;
  if (!RecvExact(20, &h)) return false;
  if (nbd::GetU64(h.data()) != nbd::kOptionReplyMagic) return false;
  *type = nbd::GetU32(h.data() + 12);
  return RecvExact(nbd::GetU32(h.data() + 16), data);
}

std::string NbdRawClient::Handshake(const std::string& name, bool structured) {
  std::string greeting;
  if (!RecvExact(nbd::kGreetingSize, &greeting)) return "no greeting";
  if (nbd::GetU64(greeting.data()) != nbd::kInitMagic) return "bad greeting magic";
  std::string flags;
  nbd::PutU32(&flags, nbd::kClientFlagFixedNewstyle | nbd::kClientFlagNoZeroes);
  if (!SendRaw(flags)) return "cannot send client flags";
  uint32_t type = 0;
  std::string data;
  if (structured) {
    if (!SendRaw(NbdOption(nbd::kOptStructuredReply, "")) || !OptionReply(&type, &data) ||
        type != nbd::kRepAck) {
      return "structured replies refused";
    }
    std::string set;
    nbd::PutU32(&set, static_cast<uint32_t>(name.size()));
    set += name;
    nbd::PutU32(&set, 1);
    nbd::PutU32(&set, 15);
    set += nbd::kBaseAllocation;
    if (!SendRaw(NbdOption(nbd::kOptSetMetaContext, set))) return "cannot send meta context";
    do {
      if (!OptionReply(&type, &data)) return "no meta context reply";
    } while (type == nbd::kRepMetaContext);
    if (type != nbd::kRepAck) return "meta context refused";
    structured_ = true;
  }
  std::string go;
  nbd::PutU32(&go, static_cast<uint32_t>(name.size()));
  go += name;
  nbd::PutU16(&go, 1);
  nbd::PutU16(&go, nbd::kInfoBlockSize);
  if (!SendRaw(NbdOption(nbd::kOptGo, go))) return "cannot send NBD_OPT_GO";
  while (true) {
    if (!OptionReply(&type, &data)) return "no NBD_OPT_GO reply";
    if (type == nbd::kRepAck) break;
    if (type != nbd::kRepInfo) return "NBD_OPT_GO refused: " + data;
    if (data.size() == 12 && nbd::GetU16(data.data()) == nbd::kInfoExport) {
      export_size_ = nbd::GetU64(data.data() + 2);
      transmission_flags_ = nbd::GetU16(data.data() + 10);
    }
  }
  return "";
}

bool NbdRawClient::SendRequest(const nbd::Request& request, const std::string& payload) {
  std::string bytes;
  nbd::AppendRequest(&bytes, request);
  bytes += payload;
  return SendRaw(bytes);
}

bool NbdRawClient::ReadSimpleReply(size_t read_len, Reply* reply) {
  std::string h;
  if (!RecvExact(nbd::kSimpleReplyHeaderSize, &h)) return false;
  if (nbd::GetU32(h.data()) != nbd::kSimpleReplyMagic) return false;
  reply->structured = false;
  reply->error = nbd::GetU32(h.data() + 4);
  reply->handle = nbd::GetU64(h.data() + 8);
  reply->payload.clear();
  if (reply->error == 0 && read_len > 0) return RecvExact(read_len, &reply->payload);
  return true;
}

bool NbdRawClient::ReadChunk(Reply* reply) {
  std::string h;
  if (!RecvExact(4, &h)) return false;
  const uint32_t magic = nbd::GetU32(h.data());
  if (magic == nbd::kSimpleReplyMagic) {
    std::string rest;
    if (!RecvExact(12, &rest)) return false;
    reply->structured = false;
    reply->error = nbd::GetU32(rest.data());
    reply->handle = nbd::GetU64(rest.data() + 4);
    reply->flags = nbd::kReplyFlagDone;
    reply->payload.clear();
    return true;
  }
  if (magic != nbd::kStructuredReplyMagic) return false;
  std::string rest;
  if (!RecvExact(16, &rest)) return false;
  reply->structured = true;
  reply->flags = nbd::GetU16(rest.data());
  reply->type = nbd::GetU16(rest.data() + 2);
  reply->handle = nbd::GetU64(rest.data() + 4);
  if (!RecvExact(nbd::GetU32(rest.data() + 12), &reply->payload)) return false;
  reply->error = 0;
  if ((reply->type & 0x8000) != 0 && reply->payload.size() >= 4) {
    reply->error = nbd::GetU32(reply->payload.data());
  }
  return true;
}

bool NbdRawClient::ReadStructuredReply(std::vector<Reply>* chunks) {
  chunks->clear();
  while (true) {
    Reply r;
    if (!ReadChunk(&r)) return false;
    chunks->push_back(r);
    if (r.flags & nbd::kReplyFlagDone) return true;
  }
}

int NbdRawClient::Write(uint64_t offset, const std::string& data, uint16_t flags) {
  nbd::Request r;
  r.type = nbd::kCmdWrite;
  r.flags = flags;
  r.handle = next_handle_++;
  r.offset = offset;
  r.length = static_cast<uint32_t>(data.size());
  Reply reply;
  if (!SendRequest(r, data) || !ReadChunk(&reply) || reply.handle != r.handle) return -1;
  return static_cast<int>(reply.error);
}

int NbdRawClient::Command(uint16_t type, uint64_t offset, uint32_t length, uint16_t flags) {
  nbd::Request r;
  r.type = type;
  r.flags = flags;
  r.handle = next_handle_++;
  r.offset = offset;
  r.length = length;
  Reply reply;
  if (!SendRequest(r) || !ReadChunk(&reply) || reply.handle != r.handle) return -1;
  return static_cast<int>(reply.error);
}

int NbdRawClient::Read(uint64_t offset, uint32_t length, std::string* data) {
  nbd::Request r;
  r.type = nbd::kCmdRead;
  r.handle = next_handle_++;
  r.offset = offset;
  r.length = length;
  if (!SendRequest(r)) return -1;
  data->clear();
  if (!structured_) {
    Reply reply;
    if (!ReadSimpleReply(length, &reply) || reply.handle != r.handle) return -1;
    *data = reply.payload;
    return static_cast<int>(reply.error);
  }
  std::vector<Reply> chunks;
  if (!ReadStructuredReply(&chunks)) return -1;
  int error = 0;
  data->assign(length, '\0');
  for (const Reply& c : chunks) {
    if (c.handle != r.handle) return -1;
    if (c.error != 0) error = static_cast<int>(c.error);
    if (c.type == nbd::kReplyTypeOffsetData && c.payload.size() >= 8) {
      const uint64_t at = nbd::GetU64(c.payload.data()) - offset;
      if (at > length || c.payload.size() - 8 > length - at) return -1;
      data->replace(at, c.payload.size() - 8, c.payload.substr(8));
    }
  }
  if (error != 0) data->clear();
  return error;
}

}  // namespace ringcache::testing
