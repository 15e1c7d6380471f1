// StreamReader: one connection's input, read in large pieces and handed out frame by frame. One
// receive takes every frame the peer has pipelined so far, so a burst of small requests costs
// one system call, not two per frame. Both ends of the block data port read through it: the
// cache node's server (cachenode/data_server.cc) and the gateway's pipelined client
// (gateway/data_channel.cc).
//
// The stream is the plain socket, or its TLS session (tls::Session, common/tls.h).
//
// Thread-safety: one reader thread.
#ifndef RINGCACHE_COMMON_STREAM_READER_H_
#define RINGCACHE_COMMON_STREAM_READER_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/tls.h"

namespace ringcache {

class StreamReader {
 public:
  static constexpr size_t kDefaultCapacity = 64 << 10;

  // `fd` and `session` (null: plaintext) are not owned.
  StreamReader(int fd, tls::Session* session, size_t capacity = kDefaultCapacity)
      : fd_(fd), session_(session), buf_(capacity) {}

  // The bytes buffered and not consumed yet.
  size_t available() const { return end_ - begin_; }
  const char* data() const { return buf_.data() + begin_; }
  void Consume(size_t n) { begin_ += n; }

  // Waits until at least `n` (at most the capacity) bytes are buffered. A receive that times
  // out (the socket's SO_RCVTIMEO) calls `on_timeout`: its error is returned, OK waits on; with
  // no `on_timeout` the timeout is the error. Otherwise OK, or kUnavailable when the stream
  // ended or failed; `*clean_end` (optional) says it ended with no byte of the frame buffered.
  absl::Status FillTo(size_t n, const std::function<absl::Status()>& on_timeout = nullptr,
                      bool* clean_end = nullptr);

  // Copies the next `len` bytes to `out`: what is buffered, then the rest straight from the
  // stream, giving up at `deadline` (a TLS read looks at it when the socket's receive timeout
  // wakes it).
  absl::Status ReadTo(char* out, size_t len, absl::Time deadline = absl::InfiniteFuture());

 private:
  const int fd_;
  tls::Session* const session_;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_STREAM_READER_H_
