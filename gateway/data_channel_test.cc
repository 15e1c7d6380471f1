// The block data protocol end to end in one process: a real cache node (with real data nodes),
// its DataServer, and the gateway's DataChannel.
#include "gateway/data_channel.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "cachenode/data_server.h"
#include "cachenode/service.h"
#include "cachenode/testing/cache_node_harness.h"
#include "common/socket.h"
#include "common/testing/test_ca.h"
#include "common/tls.h"
#include "gtest/gtest.h"

namespace ringcache::gateway {
namespace {

class DataChannelTest : public cachenode::testing::CacheNodeHarness {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(SetUpCluster(3, 2, 1));
    ASSERT_NO_FATAL_FAILURE(Start());
    gate_ = std::make_unique<cachenode::RequestGate>(node_.get(), &registry_);
    StartServer(0);
  }
  void TearDown() override {
    server_.reset();
    gate_.reset();
    CacheNodeHarness::TearDown();
  }
  void StartServer(int port) {
    auto s =
        cachenode::DataServer::Start({"127.0.0.1", port}, node_.get(), gate_.get(), &registry_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  static wire::Request Req(wire::Op op, uint64_t object, uint32_t offset, uint32_t len,
                           uint64_t epoch = 0) {
    return {op, 1, object, offset, len, 30000, epoch};
  }

  std::unique_ptr<cachenode::RequestGate> gate_;
  std::unique_ptr<cachenode::DataServer> server_;
};

TEST_F(DataChannelTest, WritesReadBackAndTrimZeroes) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::string data(3 * 4096 + 100, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 1);
  bool sent = false;
  ASSERT_TRUE(
      ch.Call(Req(wire::Op::kWrite, 2, 500, data.size()), data.data(), nullptr, &sent).ok());
  EXPECT_TRUE(sent);
  std::string back(data.size(), '\0');
  ASSERT_TRUE(ch.Call(Req(wire::Op::kRead, 2, 500, data.size()), nullptr, back.data(), &sent).ok());
  EXPECT_EQ(back, data);
  // The same through the node directly: the data protocol wrote where gRPC would have.
  std::string direct(data.size(), '\0');
  ASSERT_TRUE(node_->Read(1, 2, 500, data.size(), direct.data()).ok());
  EXPECT_EQ(direct, data);
  ASSERT_TRUE(ch.Call(Req(wire::Op::kZero, 2, 500, 4096), nullptr, nullptr, &sent).ok());
  ASSERT_TRUE(ch.Call(Req(wire::Op::kRead, 2, 500, 4096), nullptr, back.data(), &sent).ok());
  EXPECT_EQ(back.substr(0, 4096), std::string(4096, '\0'));
}

TEST_F(DataChannelTest, RefusalsArriveTypedAndTheConnectionStaysUsable) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::string buf(4096, 'x');
  bool sent = false;
  // A newer epoch is admitted, an older one refused as stale.
  ASSERT_TRUE(ch.Call(Req(wire::Op::kWrite, 0, 0, 4096, 10), buf.data(), nullptr, &sent).ok());
  absl::Status s = ch.Call(Req(wire::Op::kWrite, 0, 0, 4096, 9), buf.data(), nullptr, &sent);
  EXPECT_TRUE(IsKind(s, ErrorKind::kStaleEpoch)) << s;
  // An unknown VDI.
  wire::Request r = Req(wire::Op::kRead, 0, 0, 4096);
  r.vdi = 77;
  s = ch.Call(r, nullptr, buf.data(), &sent);
  EXPECT_TRUE(IsKind(s, ErrorKind::kUnknownVdi)) << s;
  // A fenced node.
  ASSERT_TRUE(node_->ownership()->Quarantine("test").ok());
  s = ch.Call(Req(wire::Op::kRead, 0, 0, 4096), nullptr, buf.data(), &sent);
  EXPECT_TRUE(IsKind(s, ErrorKind::kFenced)) << s;
  ASSERT_TRUE(node_->Readmit(10).ok());
  EXPECT_TRUE(ch.Call(Req(wire::Op::kRead, 0, 0, 4096, 10), nullptr, buf.data(), &sent).ok());
}

TEST_F(DataChannelTest, ManyCallersInParallel) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::string data(4096, static_cast<char>('a' + t)), back(4096, '\0');
      for (int i = 0; i < 50; ++i) {
        bool sent = false;
        const uint32_t off = static_cast<uint32_t>(t) * 4096;
        if (!ch.Call(Req(wire::Op::kWrite, 3, off, 4096), data.data(), nullptr, &sent).ok() ||
            !ch.Call(Req(wire::Op::kRead, 3, off, 4096), nullptr, back.data(), &sent).ok() ||
            back != data) {
          ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(DataChannelTest, ARestartedServerIsReachedThroughFreshConnections) {
  const int port = server_->port();
  DataChannel ch("127.0.0.1", port, 30000);
  std::string buf(4096, 'r');
  bool sent = false;
  ASSERT_TRUE(ch.Call(Req(wire::Op::kWrite, 1, 0, 4096), buf.data(), nullptr, &sent).ok());
  server_.reset();  // the pooled connection is closed by the server
  sent = true;
  absl::Status down = ch.Call(Req(wire::Op::kRead, 1, 0, 4096), nullptr, buf.data(), &sent);
  EXPECT_FALSE(down.ok());
  EXPECT_FALSE(sent) << "nothing was listening: the caller may take another path";
  StartServer(port);
  std::string back(4096, '\0');
  EXPECT_TRUE(ch.Call(Req(wire::Op::kRead, 1, 0, 4096), nullptr, back.data(), &sent).ok());
  EXPECT_EQ(back, buf);
}

TEST_F(DataChannelTest, CancelInFlightBreaksAWaitingCall) {
  // A peer that accepts and never answers.
  int port = 0;
  auto listen_fd = ListenTcp("127.0.0.1", 0, &port);
  ASSERT_TRUE(listen_fd.ok());
  DataChannel ch("127.0.0.1", port, 60000);
  absl::Status result;
  bool sent = false;
  std::thread caller([&] {
    std::string buf(4096, '\0');
    result = ch.Call(Req(wire::Op::kRead, 0, 0, 4096), nullptr, buf.data(), &sent);
  });
  const int conn = accept(*listen_fd, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  char head[wire::kRequestBytes];
  ASSERT_TRUE(ReadFull(conn, head, sizeof(head), absl::InfiniteFuture()).ok());  // it was sent
  ch.CancelInFlight();
  caller.join();
  EXPECT_TRUE(absl::IsCancelled(result)) << result;
  EXPECT_TRUE(sent);
  close(conn);
  close(*listen_fd);
}

TEST_F(DataChannelTest, MalformedRequestClosesOnlyThatConnection) {
  auto fd = DialTcp("127.0.0.1", server_->port(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  char junk[wire::kRequestBytes] = {1, 2, 3};
  ASSERT_EQ(send(*fd, junk, sizeof(junk), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(junk)));
  char c;
  bool eof = false;
  EXPECT_FALSE(ReadFull(*fd, &c, 1, absl::Now() + absl::Seconds(10), &eof).ok());
  EXPECT_TRUE(eof) << "the server closes a connection that does not speak the protocol";
  close(*fd);
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::string buf(4096, '\0');
  bool sent = false;
  EXPECT_TRUE(ch.Call(Req(wire::Op::kRead, 5, 0, 4096), nullptr, buf.data(), &sent).ok());
}

// Resident memory of this process, in bytes.
uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// A client that lies about lengths: 64 reads of 64 MiB each (an unknown VDI, or beyond the
// object), pipelined in one send, some flagged to run aside. Each is refused before a buffer is
// set aside for its answer, so the node's memory does not grow by their sum (4 GiB).
TEST_F(DataChannelTest, LyingReadLengthsAreRefusedBeforeAnyBufferIsSetAside) {
  auto fd = DialTcp("127.0.0.1", server_->port(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  const uint64_t before = ResidentBytes();
  std::string burst;
  for (int i = 0; i < 64; ++i) {
    wire::Request r = Req(wire::Op::kRead, 3, 0, wire::kMaxLength);
    r.vdi = i % 2 == 0 ? 1 : 999;
    r.flags = i % 4 < 2 ? wire::kMayReorder : 0;
    r.tag = i;
    char head[wire::kRequestBytes];
    wire::EncodeRequest(r, head);
    burst.append(head, sizeof(head));
  }
  ASSERT_EQ(send(*fd, burst.data(), burst.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(burst.size()));
  for (int i = 0; i < 64; ++i) {
    char head[wire::kResponseBytes];
    ASSERT_TRUE(ReadFull(*fd, head, sizeof(head), absl::Now() + absl::Seconds(30)).ok()) << i;
    wire::Response resp;
    ASSERT_TRUE(wire::DecodeResponse(head, &resp).ok());
    EXPECT_NE(resp.code, absl::StatusCode::kOk) << i;
    EXPECT_EQ(resp.data_len, 0u) << i;
    std::string message(resp.message_len, '\0');
    ASSERT_TRUE(
        ReadFull(*fd, message.data(), message.size(), absl::Now() + absl::Seconds(30)).ok());
  }
  EXPECT_LT(ResidentBytes(), before + (256u << 20))
      << "the refused reads' buffers were allocated anyway";
  close(*fd);
}

// Completions of asynchronous reads, gathered for a test.
class Completions {
 public:
  absl::AnyInvocable<void(absl::Status)> Slot(size_t i) {
    return [this, i](absl::Status s) {
      absl::MutexLock l(&mu_);
      results_[i] = std::move(s);
      ++done_;
    };
  }
  // Waits until `n` completions ran; returns their statuses by slot.
  std::map<size_t, absl::Status> Wait(size_t n) {
    absl::MutexLock l(&mu_);
    auto all = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ >= n; };
    mu_.Await(absl::Condition(&all));
    return results_;
  }
  size_t done() {
    absl::MutexLock l(&mu_);
    return done_;
  }

 private:
  absl::Mutex mu_;
  std::map<size_t, absl::Status> results_ ABSL_GUARDED_BY(mu_);
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;
};

// Pipelined reads from 4 threads at once, `rounds` bursts of 8 each, of the blocks `data` holds
// (block i read by `read(i)`); returns how many failed or came back with other data.
int PipelinedReadsFromThreads(DataChannel* ch, const std::vector<std::string>& data, int rounds,
                              const std::function<wire::Request(int)>& read) {
  const int n = static_cast<int>(data.size());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < rounds; ++round) {
        Completions mine;
        std::vector<std::string> got(8, std::string(4096, '\0'));
        for (int k = 0; k < 8; ++k) {
          if (!ch->ReadAsync(read((t * 8 + k + round) % n), got[k].data(), mine.Slot(k))) {
            ++bad;
            return;
          }
        }
        std::map<size_t, absl::Status> r = mine.Wait(8);
        for (int k = 0; k < 8; ++k) {
          if (!r[k].ok() || got[k] != data[(t * 8 + k + round) % n]) ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return bad.load();
}

TEST_F(DataChannelTest, PipelinedReadsCompleteWithTheirOwnDataAndErrors) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  constexpr int kReads = 64;
  std::vector<std::string> data(kReads);
  bool sent = false;
  for (int i = 0; i < kReads; ++i) {
    data[i].assign(4096, static_cast<char>(i + 1));
    data[i][i] = 'x';
    ASSERT_TRUE(ch.Call(Req(wire::Op::kWrite, 10 + i % 4, (i / 4) * 4096, 4096), data[i].data(),
                        nullptr, &sent)
                    .ok());
  }
  std::vector<std::string> back(kReads, std::string(4096, '\0'));
  Completions early;
  EXPECT_FALSE(ch.ReadAsync(Req(wire::Op::kRead, 10, 0, 4096), back[0].data(), early.Slot(0)))
      << "no pipelined connection before a blocking read opened one";
  ASSERT_TRUE(ch.Call(Req(wire::Op::kRead, 10, 0, 4096), nullptr, back[0].data(), &sent).ok());
  // A burst from one thread, with a refused request (unknown VDI) in place of read kReads / 2:
  // every read gets its own answer, the refusal only its own.
  Completions c;
  for (int i = 0; i < kReads; ++i) {
    wire::Request r = i == kReads / 2 ? Req(wire::Op::kRead, 0, 0, 4096)
                                      : Req(wire::Op::kRead, 10 + i % 4, (i / 4) * 4096, 4096);
    if (i == kReads / 2) r.vdi = 77;
    ASSERT_TRUE(ch.ReadAsync(r, back[i].data(), c.Slot(i))) << i;
  }
  std::map<size_t, absl::Status> results = c.Wait(kReads);
  ASSERT_EQ(results.size(), static_cast<size_t>(kReads));
  for (int i = 0; i < kReads; ++i) {
    if (i == kReads / 2) {
      EXPECT_TRUE(IsKind(results[i], ErrorKind::kUnknownVdi)) << results[i];
      continue;
    }
    EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
    EXPECT_EQ(back[i], data[i]) << i;  // slot i reads what write i wrote
  }
  // Pipelined reads from many threads at once.
  EXPECT_EQ(PipelinedReadsFromThreads(&ch, data, 50, [](int i) {
              return Req(wire::Op::kRead, 10 + i % 4, (i / 4) * 4096, 4096);
            }),
            0);
}

TEST_F(DataChannelTest, TheServerRunsABurstInOrder) {
  // One send carries a write and then reads of the range it writes, plus a read of another
  // object: the answers come back in the requests' order and the read sees the write.
  auto fd = DialTcp("127.0.0.1", server_->port(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  std::string burst;
  auto add = [&burst](const wire::Request& r) {
    char head[wire::kRequestBytes];
    wire::EncodeRequest(r, head);
    burst.append(head, sizeof(head));
  };
  const std::string payload(4096, 'w');
  add(Req(wire::Op::kRead, 20, 0, 4096));  // nothing written yet: zeroes
  add(Req(wire::Op::kWrite, 20, 0, 4096));
  burst += payload;
  for (int i = 0; i < 8; ++i) add(Req(wire::Op::kRead, 20, 0, 4096));
  add(Req(wire::Op::kRead, 21, 0, 4096));
  ASSERT_EQ(send(*fd, burst.data(), burst.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(burst.size()));
  auto answer = [&](std::string* data) {
    char head[wire::kResponseBytes];
    EXPECT_TRUE(ReadFull(*fd, head, sizeof(head), absl::Now() + absl::Seconds(30)).ok());
    wire::Response resp;
    EXPECT_TRUE(wire::DecodeResponse(head, &resp).ok());
    EXPECT_EQ(resp.code, absl::StatusCode::kOk);
    data->assign(resp.data_len, '\0');
    if (resp.data_len > 0) {
      EXPECT_TRUE(ReadFull(*fd, data->data(), data->size(), absl::Now() + absl::Seconds(30)).ok());
    }
  };
  std::string got;
  answer(&got);
  EXPECT_EQ(got, std::string(4096, '\0'));
  answer(&got);
  EXPECT_TRUE(got.empty()) << "the write's answer carries no data";
  for (int i = 0; i < 8; ++i) {
    answer(&got);
    EXPECT_EQ(got, payload) << i;
  }
  answer(&got);
  EXPECT_EQ(got, std::string(4096, '\0'));
  close(*fd);
}

TEST_F(DataChannelTest, APipelinedMissRunsAsideAndCachedReadsAnswerOnTheSameConnection) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  const std::string cached(4096, 'c');
  bool sent = false;
  ASSERT_TRUE(ch.Call(Req(wire::Op::kWrite, 30, 0, 4096), cached.data(), nullptr, &sent).ok());
  std::string buf(4096, '\0');
  ASSERT_TRUE(ch.Call(Req(wire::Op::kRead, 30, 0, 4096), nullptr, buf.data(), &sent).ok());
  metrics::Counter* aside = registry_.GetCounter("ringcache_cachenode_data_aside_reads_total", "");
  const double aside_before = aside->Value();
  // Object 31 was never written: its read is a miss fetched from the data nodes (zeroes), run
  // aside; the cached reads sent after it on the same connection are answered inline.
  std::vector<std::string> out(9, std::string(4096, 'x'));
  Completions c;
  ASSERT_TRUE(ch.ReadAsync(Req(wire::Op::kRead, 31, 0, 4096), out[0].data(), c.Slot(0)));
  for (size_t i = 1; i < out.size(); ++i) {
    ASSERT_TRUE(ch.ReadAsync(Req(wire::Op::kRead, 30, 0, 4096), out[i].data(), c.Slot(i)));
  }
  std::map<size_t, absl::Status> results = c.Wait(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(results[i].ok()) << i << ": " << results[i];
    EXPECT_EQ(out[i], i == 0 ? std::string(4096, '\0') : cached) << i;
  }
  EXPECT_EQ(aside->Value() - aside_before, 1) << "only the miss ran aside";
}

// Under TLS reads are pipelined as in plaintext (GnuTLS lets one thread send and another
// receive on a session): a burst from several threads on the one pipelined connection, each
// read with its own data, and a miss run aside whose answer goes through the same session.
TEST_F(DataChannelTest, UnderTlsReadsArePipelinedAndAMissRunsAside) {
  const tls::testing::TestCa ca(dir_ + "/tls");
  tls::ServerOptions o;
  o.roles = {tls::kRoleGateway};
  auto server_tls = tls::ServerContext::Create(ca.Issue(tls::kRoleCacheNode, "cachenode-1"), o);
  ASSERT_TRUE(server_tls.ok()) << server_tls.status();
  auto client_tls =
      tls::ClientContext::Create(ca.Issue(tls::kRoleGateway, "gateway-1"), tls::kRoleCacheNode);
  ASSERT_TRUE(client_tls.ok()) << client_tls.status();
  server_.reset();
  cachenode::DataServerOptions so;
  so.tls = *server_tls;
  auto started = cachenode::DataServer::Start(so, node_.get(), gate_.get(), &registry_);
  ASSERT_TRUE(started.ok()) << started.status();
  server_ = std::move(*started);

  DataChannel ch("127.0.0.1", server_->port(), 30000, *client_tls);
  constexpr int kBlocks = 16;
  std::vector<std::string> data(kBlocks);
  bool sent = false;
  for (int i = 0; i < kBlocks; ++i) {
    data[i].assign(4096, static_cast<char>('a' + i));
    ASSERT_TRUE(
        ch.Call(Req(wire::Op::kWrite, 40, i * 4096, 4096), data[i].data(), nullptr, &sent).ok());
  }
  std::string buf(4096, '\0');
  ASSERT_TRUE(ch.Call(Req(wire::Op::kRead, 40, 0, 4096), nullptr, buf.data(), &sent).ok());
  metrics::Counter* aside = registry_.GetCounter("ringcache_cachenode_data_aside_reads_total", "");
  const double aside_before = aside->Value();
  Completions miss;
  std::string zeroes(4096, 'x');
  ASSERT_TRUE(ch.ReadAsync(Req(wire::Op::kRead, 41, 0, 4096), zeroes.data(), miss.Slot(0)))
      << "no pipelined connection under TLS";
  EXPECT_EQ(PipelinedReadsFromThreads(
                &ch, data, 25, [](int i) { return Req(wire::Op::kRead, 40, i * 4096, 4096); }),
            0);
  std::map<size_t, absl::Status> m = miss.Wait(1);
  EXPECT_TRUE(m[0].ok()) << m[0];
  EXPECT_EQ(zeroes, std::string(4096, '\0'));
  EXPECT_EQ(aside->Value() - aside_before, 1) << "the miss did not run aside";
}

// A peer that answers the first read of each connection with `fill` bytes and then only reads.
class SilentPeer {
 public:
  SilentPeer() {
    auto fd = ListenTcp("127.0.0.1", 0, &port_);
    EXPECT_TRUE(fd.ok());
    listen_ = *fd;
  }
  ~SilentPeer() {
    for (int c : conns_) close(c);
    close(listen_);
  }
  int port() const { return port_; }
  // Accepts a connection, answers its first request (a read) and returns it.
  int AcceptAndAnswerOnce() {
    const int c = accept(listen_, nullptr, nullptr);
    conns_.push_back(c);
    char head[wire::kRequestBytes];
    EXPECT_TRUE(ReadFull(c, head, sizeof(head), absl::Now() + absl::Seconds(30)).ok());
    wire::Request r;
    EXPECT_TRUE(wire::DecodeRequest(head, &r).ok());
    char out[wire::kResponseBytes];
    wire::EncodeResponse(wire::FromStatus(absl::OkStatus(), r.length), out);
    std::string reply(out, sizeof(out));
    reply += std::string(r.length, 'p');
    EXPECT_EQ(send(c, reply.data(), reply.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(reply.size()));
    return c;
  }
  int Accept() {
    const int c = accept(listen_, nullptr, nullptr);
    conns_.push_back(c);
    return c;
  }

 private:
  int listen_ = -1;
  int port_ = 0;
  std::vector<int> conns_;
};

TEST_F(DataChannelTest, AnEndedPipeFailsEveryWaitingRead) {
  for (const char* how : {"cancel", "peer closes", "deadline"}) {
    SCOPED_TRACE(how);
    SilentPeer peer;
    DataChannel ch("127.0.0.1", peer.port(), std::string(how) == "deadline" ? 300 : 60000);
    std::string buf(4096, '\0');
    bool sent = false;
    absl::Status first;
    std::thread caller(
        [&] { first = ch.Call(Req(wire::Op::kRead, 0, 0, 4096), nullptr, buf.data(), &sent); });
    peer.AcceptAndAnswerOnce();
    const int pipe = peer.Accept();  // the pipelined connection the answered read opened
    caller.join();
    ASSERT_TRUE(first.ok()) << first;
    std::vector<std::string> out(3, std::string(4096, '\0'));
    Completions c;
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(ch.ReadAsync(Req(wire::Op::kRead, 0, 0, 4096), out[i].data(), c.Slot(i)));
    }
    char heads[3 * wire::kRequestBytes];
    ASSERT_TRUE(ReadFull(pipe, heads, sizeof(heads), absl::Now() + absl::Seconds(30)).ok())
        << "all three were sent";
    if (std::string(how) == "cancel") ch.CancelInFlight();
    if (std::string(how) == "peer closes") shutdown(pipe, SHUT_RDWR);
    std::map<size_t, absl::Status> results = c.Wait(3);
    for (size_t i = 0; i < out.size(); ++i) {
      const absl::Status& s = results[i];
      if (std::string(how) == "cancel") {
        EXPECT_TRUE(absl::IsCancelled(s)) << s;
      }
      if (std::string(how) == "peer closes") {
        EXPECT_TRUE(absl::IsUnavailable(s)) << s;
      }
      if (std::string(how) == "deadline") {
        EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
      }
    }
    EXPECT_FALSE(ch.ReadAsync(Req(wire::Op::kRead, 0, 0, 4096), buf.data(), c.Slot(9)))
        << "an ended pipe takes no more reads";
    EXPECT_EQ(c.done(), 3u);
  }
}

}  // namespace
}  // namespace ringcache::gateway
