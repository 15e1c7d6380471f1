#include "cachenode/testing/embedded_datanodes.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace ringcache::cachenode::testing {

EmbeddedDataNodes::EmbeddedDataNodes(const std::string& dir, int count) : dir_(dir) {
  for (int i = 0; i < count; ++i) {
    auto n = std::make_unique<Node>();
    n->hdd = std::make_unique<datanode::HddEmulator>(datanode::HddConfig{}, Clock::Real());
    nodes_.push_back(std::move(n));
    OpenStore(i);
    const int port = Serve(i, "127.0.0.1:0");
    endpoints_.push_back({static_cast<uint32_t>(i + 1), absl::StrCat("127.0.0.1:", port), 1.0, ""});
  }
}

void EmbeddedDataNodes::OpenStore(int i) {
  auto store = datanode::BlockStore::Open({absl::StrCat(dir_, "/dn", i + 1), 8 << 20});
  if (!store.ok()) std::abort();
  nodes_[i]->store = std::move(*store);
}

void EmbeddedDataNodes::WipeForTest(int i) {
  Node* n = nodes_[i].get();
  if (n->server) StopForTest(i);
  n->scrubber.reset();
  n->service.reset();
  n->store.reset();
  std::filesystem::remove_all(absl::StrCat(dir_, "/dn", i + 1));
  OpenStore(i);
  Serve(i, endpoints_[i].address);
}

int EmbeddedDataNodes::Serve(int i, const std::string& listen) {
  Node* n = nodes_[i].get();
  const auto id = static_cast<uint32_t>(i + 1);
  n->service = std::make_unique<datanode::DataNodeService>(id, n->store.get(), n->hdd.get(),
                                                           &registry_);
  datanode::Scrubber::Options so;
  so.interval = absl::ZeroDuration();
  so.mb_s = 1000;
  n->scrubber = std::make_unique<datanode::Scrubber>(id, n->store.get(), so, nullptr);
  n->service->SetScrubber(n->scrubber.get());
  auto log_port = datanode::LogPort::Start({}, n->service.get(), &registry_);
  if (!log_port.ok()) std::abort();
  n->log_port = *std::move(log_port);
  n->service->set_log_port(n->log_port->port());
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  b.RegisterService(n->service.get());
  b.SetMaxReceiveMessageSize(64 << 20);
  n->server = b.BuildAndStart();
  if (!n->server || port == 0) std::abort();
  return port;
}

void EmbeddedDataNodes::RestartForTest(int i) { Serve(i, endpoints_[i].address); }

EmbeddedDataNodes::~EmbeddedDataNodes() {
  for (auto& n : nodes_) {
    if (n->log_port) n->log_port->Stop();
    if (n->server) n->server->Shutdown(std::chrono::system_clock::now());
  }
}

void EmbeddedDataNodes::StopForTest(int i) {
  nodes_[i]->log_port.reset();
  nodes_[i]->server->Shutdown(std::chrono::system_clock::now());
  nodes_[i]->server.reset();
}

}  // namespace ringcache::cachenode::testing
