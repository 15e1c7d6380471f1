// Test-only: M real data nodes (BlockStore + DataNodeService + gRPC server and log port on
// 127.0.0.1) inside
// the test process, so cache node tests exercise the real data path without child processes.
//
// Thread-safety: construct and destroy from one thread; the servers are thread-safe.
#ifndef RINGCACHE_CACHENODE_TESTING_EMBEDDED_DATANODES_H_
#define RINGCACHE_CACHENODE_TESTING_EMBEDDED_DATANODES_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "datanode/client/datanode_pool.h"
#include "datanode/hdd_emulator.h"
#include "datanode/log_port.h"
#include "datanode/service.h"
#include "datanode/store.h"

namespace ringcache::cachenode::testing {

class EmbeddedDataNodes {
 public:
  // Starts `count` data nodes with state under `dir`.
  EmbeddedDataNodes(const std::string& dir, int count);
  ~EmbeddedDataNodes();
  const std::vector<datanode::DataNodeEndpoint>& endpoints() const { return endpoints_; }
  datanode::BlockStore* store(int i) { return nodes_[i]->store.get(); }
  // Stops node i's gRPC server and log port (its store stays readable and writable for checks).
  void StopForTest(int i);
  // Serves node i again, on its old address, with the store as it is now.
  void RestartForTest(int i);
  // Stops node i and serves it again on its old address with a new, empty store (a wiped or
  // replaced disk).
  void WipeForTest(int i);
  // Closes node i's log port only; its Health still announces the port (a port that failed).
  void StopLogPortForTest(int i) { nodes_[i]->log_port.reset(); }
  // Log appends the nodes' log ports served (all nodes together).
  double LogPortRequests() {
    return registry_.GetCounter("ringcache_datanode_log_port_requests_total", "")->Value();
  }
  // Block writes (kStoreBlocks) the nodes' log ports served (all nodes together).
  double LogPortBlockWrites() {
    return registry_.GetCounter("ringcache_datanode_log_port_block_writes_total", "")->Value();
  }
  // Block reads (kLoadBlocks) the nodes' log ports served (all nodes together).
  double LogPortBlockReads() {
    return registry_.GetCounter("ringcache_datanode_log_port_block_reads_total", "")->Value();
  }
  // Node i's log port (a new one after each restart).
  int log_port(int i) const { return nodes_[i]->log_port->port(); }

 private:
  struct Node;
  // Builds node i's service and gRPC server on `listen` ("127.0.0.1:0": any port); returns the
  // port.
  int Serve(int i, const std::string& listen);
  struct Node {
    std::unique_ptr<datanode::BlockStore> store;
    std::unique_ptr<datanode::HddEmulator> hdd;
    std::unique_ptr<datanode::Scrubber> scrubber;  // passes only when asked
    std::unique_ptr<datanode::DataNodeService> service;
    std::unique_ptr<datanode::LogPort> log_port;
    std::unique_ptr<grpc::Server> server;
  };
  // Opens node i's store (new and empty if its directory is).
  void OpenStore(int i);

  const std::string dir_;
  metrics::Registry registry_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<datanode::DataNodeEndpoint> endpoints_;
};

}  // namespace ringcache::cachenode::testing

#endif  // RINGCACHE_CACHENODE_TESTING_EMBEDDED_DATANODES_H_
