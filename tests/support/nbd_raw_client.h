// Test support: a deliberately simple, blocking NBD client over a raw TCP socket, for tests that
// must send malformed bytes or inspect replies byte by byte (real clients refuse to misbehave).
// Every receive is bounded by a socket timeout, so a test never hangs on a silent server.
// Used only by tests.
//
// Thread-compatible: one client per thread.
#ifndef RINGCACHE_TESTS_SUPPORT_NBD_RAW_CLIENT_H_
#define RINGCACHE_TESTS_SUPPORT_NBD_RAW_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gateway/nbd_protocol.h"

namespace ringcache::testing {

class NbdRawClient {
 public:
  struct Reply {
    bool structured = false;
    uint64_t handle = 0;
    uint32_t error = 0;   // simple reply error, or the error of an error chunk
    uint16_t flags = 0;   // structured chunk flags
    uint16_t type = 0;    // structured chunk type
    std::string payload;  // simple READ data, or the structured chunk payload
  };

  NbdRawClient() = default;
  ~NbdRawClient();
  NbdRawClient(const NbdRawClient&) = delete;
  NbdRawClient& operator=(const NbdRawClient&) = delete;

  // Connects to 127.0.0.1:port with receive timeout `timeout_s`, from address `from` (another
  // loopback address, say) when given. Returns false on failure.
  bool Connect(int port, double timeout_s = 20, const char* from = nullptr);
  // Reads the greeting and runs a fixed newstyle handshake ending in NBD_OPT_GO for `name`
  // (asking for NBD_INFO_BLOCK_SIZE); with `structured`, first negotiates structured replies and
  // base:allocation. Returns "" on success, else what went wrong.
  std::string Handshake(const std::string& name, bool structured = true);

  bool SendRaw(const std::string& bytes);
  // Receives exactly n bytes; false on timeout, error or EOF.
  bool RecvExact(size_t n, std::string* out);
  // Returns true once the server has closed the connection (EOF or reset), false on timeout.
  // Any bytes still arriving first are discarded.
  bool WaitClosed();

  // Sends one request (its payload follows the header when non-empty).
  bool SendRequest(const gateway::nbd::Request& request, const std::string& payload = "");
  // Reads one simple reply; when it reports success, `read_len` data bytes are read after it.
  bool ReadSimpleReply(size_t read_len, Reply* reply);
  // Reads one structured reply chunk (or a simple reply, if that is what arrives; then no data).
  bool ReadChunk(Reply* reply);
  // Reads all chunks of one structured reply, up to and including the one flagged DONE.
  bool ReadStructuredReply(std::vector<Reply>* chunks);

  // Round trips on a negotiated connection; each returns the NBD errno (0 = success) or -1 when
  // the connection failed. Read fills *data.
  int Write(uint64_t offset, const std::string& data, uint16_t flags = 0);
  int Read(uint64_t offset, uint32_t length, std::string* data);
  int Command(uint16_t type, uint64_t offset, uint32_t length, uint16_t flags = 0);

  uint64_t export_size() const { return export_size_; }
  uint16_t transmission_flags() const { return transmission_flags_; }
  bool structured() const { return structured_; }
  int fd() const { return fd_; }

 private:
  bool OptionReply(uint32_t* type, std::string* data);

  int fd_ = -1;
  uint64_t next_handle_ = 1;
  uint64_t export_size_ = 0;
  uint16_t transmission_flags_ = 0;
  bool structured_ = false;
};

// Builds an option request: IHAVEOPT, option, length, data.
std::string NbdOption(uint32_t option, const std::string& data);

}  // namespace ringcache::testing

#endif  // RINGCACHE_TESTS_SUPPORT_NBD_RAW_CLIENT_H_
