// The fixture of the NbdServer tests (nbd_server_test.cc, nbd_server_limits_test.cc): a
// memory device with gates that hold reads until opened, an export provider, and a server on a
// loopback port with a raw-socket client.
#ifndef RINGCACHE_GATEWAY_TESTING_NBD_SERVER_FIXTURE_H_
#define RINGCACHE_GATEWAY_TESTING_NBD_SERVER_FIXTURE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gateway/nbd_server.h"
#include "gateway/testing/mem_device.h"
#include "tests/support/nbd_raw_client.h"

namespace ringcache::gateway::nbd_test {

using ringcache::testing::NbdRawClient;

constexpr uint64_t kGateOffset = 1 << 20;  // reads here block until the gate opens

// A MemDevice whose reads at kGateOffset wait for Open(); it records peak concurrency and can
// fail reads at kFailOffset.
class GateDevice : public testing::MemDevice {
 public:
  static constexpr uint64_t kFailOffset = 2 << 20;
  explicit GateDevice(uint64_t size) : MemDevice(size) {}

  absl::Status Read(uint64_t offset, uint32_t len, char* buf) override {
    Enter();
    if (offset == kGateOffset) {
      {
        absl::MutexLock l(&mu_);
        ++waiting_;
      }
      gate_.WaitForNotification();
    }
    absl::Status s = offset == kFailOffset ? absl::InternalError("injected read failure")
                                           : MemDevice::Read(offset, len, buf);
    Leave();
    return s;
  }
  // With async on, reads also take the asynchronous path: each completes on a thread of its
  // own, and a read at kAsyncFailOffset completes with an error (the server then reads again).
  static constexpr uint64_t kAsyncFailOffset = 3 << 20;
  bool ReadAsync(uint64_t offset, uint32_t len, char* buf,
                 absl::AnyInvocable<void(absl::Status)> done) override {
    absl::MutexLock l(&mu_);
    if (!async_) return false;
    completers_.emplace_back([this, offset, len, buf, done = std::move(done)]() mutable {
      if (offset == kAsyncFailOffset) {
        {
          absl::MutexLock l(&mu_);
          ++async_failed_;
        }
        done(absl::UnavailableError("injected asynchronous failure"));
        return;
      }
      absl::Status s = MemDevice::Read(offset, len, buf);
      {
        absl::MutexLock l(&mu_);
        ++async_ok_;
      }
      done(s);
    });
    return true;
  }
  ~GateDevice() override {
    std::vector<std::thread> threads;
    {
      absl::MutexLock l(&mu_);
      threads.swap(completers_);
    }
    for (std::thread& t : threads) t.join();
  }
  void SetAsync(bool on) {
    absl::MutexLock l(&mu_);
    async_ = on;
  }
  int async_ok() {
    absl::MutexLock l(&mu_);
    return async_ok_;
  }
  int async_failed() {
    absl::MutexLock l(&mu_);
    return async_failed_;
  }
  int blocking_reads() {
    absl::MutexLock l(&mu_);
    return blocking_reads_;
  }
  void Open() {
    if (!gate_.HasBeenNotified()) gate_.Notify();
  }
  int waiting() {  // reads that reached the gate so far
    absl::MutexLock l(&mu_);
    return waiting_;
  }
  // Blocks until `n` reads wait at the gate (bounded by the test's own timeout).
  void AwaitWaiting(int n) {
    absl::MutexLock l(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiting_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  int peak() {
    absl::MutexLock l(&mu_);
    return peak_;
  }

 private:
  void Enter() {
    absl::MutexLock l(&mu_);
    ++blocking_reads_;
    peak_ = std::max(peak_, ++active_);
  }
  void Leave() {
    absl::MutexLock l(&mu_);
    --active_;
  }
  absl::Notification gate_;
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  bool async_ ABSL_GUARDED_BY(mu_) = false;
  int async_ok_ ABSL_GUARDED_BY(mu_) = 0;
  int async_failed_ ABSL_GUARDED_BY(mu_) = 0;
  int blocking_reads_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> completers_ ABSL_GUARDED_BY(mu_);
};

class GateProvider : public ExportProvider {
 public:
  GateProvider() {
    info_.name = "disk";
    info_.size_bytes = 4 << 20;
    device_ = std::make_shared<GateDevice>(info_.size_bytes);
    ro_.name = "ro";
    ro_.size_bytes = 1 << 20;
    ro_.read_only = true;
  }
  absl::StatusOr<ExportInfo> Find(const std::string& name) override {
    if (name == info_.name) return info_;
    if (name == ro_.name) return ro_;
    return absl::NotFoundError("no such export");
  }
  std::vector<ExportInfo> List() override { return {info_, ro_}; }
  absl::StatusOr<std::shared_ptr<BlockDevice>> Open(const std::string& /*name*/) override {
    return std::shared_ptr<BlockDevice>(device_);
  }
  GateDevice* device() { return device_.get(); }

 private:
  ExportInfo info_, ro_;
  std::shared_ptr<GateDevice> device_;
};

class NbdServerTest : public ::testing::Test {
 protected:
  void StartServer(NbdServerConfig config = {}) {
    config.listen = "127.0.0.1:0";
    server_ = std::make_unique<NbdServer>(config, &provider_, &registry_);
    absl::StatusOr<int> port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  std::unique_ptr<NbdRawClient> Client(const std::string& name = "disk", bool structured = true) {
    auto c = std::make_unique<NbdRawClient>();
    EXPECT_TRUE(c->Connect(port_));
    EXPECT_EQ(c->Handshake(name, structured), "");
    return c;
  }
  nbd::Request Req(uint16_t type, uint64_t handle, uint64_t offset, uint32_t length,
                   uint16_t flags = 0) {
    nbd::Request r;
    r.type = type;
    r.handle = handle;
    r.offset = offset;
    r.length = length;
    r.flags = flags;
    return r;
  }

  GateProvider provider_;
  metrics::Registry registry_;
  std::unique_ptr<NbdServer> server_;
  int port_ = 0;
};

}  // namespace ringcache::gateway::nbd_test

#endif  // RINGCACHE_GATEWAY_TESTING_NBD_SERVER_FIXTURE_H_
