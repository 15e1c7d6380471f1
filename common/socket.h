// Small blocking TCP helpers for the binary protocols (the block data protocol): listen, dial
// with a timeout, read and write whole buffers with a deadline. Every fd returned is
// close-on-exec; connected sockets have TCP_NODELAY (small request/response frames).
//
// Thread-safety: thread-safe (no shared state).
#ifndef RINGCACHE_COMMON_SOCKET_H_
#define RINGCACHE_COMMON_SOCKET_H_

#include <sys/uio.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringcache {

// Binds and listens on host:port (port 0 picks one; *bound gets the port). Returns the fd.
absl::StatusOr<int> ListenTcp(const std::string& host, int port, int* bound);
// Connects to host:port within `timeout`. kUnavailable when nothing answers.
absl::StatusOr<int> DialTcp(const std::string& host, int port, absl::Duration timeout);
// Reads exactly `n` bytes. kUnavailable on EOF or error (`*eof_at_start`, if not null, says the
// peer closed before sending anything), kDeadlineExceeded past `deadline` — or, with an infinite
// deadline, when the socket's receive timeout (SetReceiveTimeout) expires.
absl::Status ReadFull(int fd, char* buf, size_t n, absl::Time deadline,
                      bool* eof_at_start = nullptr);
// Makes a blocking receive on `fd` give up after `timeout` (SO_RCVTIMEO).
void SetReceiveTimeout(int fd, absl::Duration timeout);
// Writes every byte of the `count` buffers (which it consumes). kUnavailable on error, also
// when a send timeout (SO_SNDTIMEO) expires.
absl::Status WriteFullV(int fd, struct iovec* iov, int count);

// Splits "host:port" into its parts. Accepts "[v6]:port". Returns kInvalidArgument naming the
// input when it is malformed or the port is outside 0..65535.
absl::Status SplitHostPort(const std::string& addr, std::string* host, int* port);
// Whether `host` names the loopback interface: 127.0.0.0/8, ::1 or "localhost".
bool IsLoopbackHost(const std::string& host);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_SOCKET_H_
