// StreamReader (common/stream_reader.h) over a socket pair: pipelined frames come out of one
// receive, a frame larger than what is buffered is read straight from the socket, a receive
// timeout asks the caller, and the end of the stream says whether it fell between frames.
#include "common/stream_reader.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "common/socket.h"

namespace ringcache {
namespace {

class StreamReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(write(fds_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  void CloseWriter() {
    close(fds_[1]);
    fds_[1] = -1;
  }
  int fds_[2] = {-1, -1};
};

TEST_F(StreamReaderTest, PipelinedFramesComeOutOfOneBuffer) {
  StreamReader in(fds_[0], nullptr, 64);
  Send("aaaabbbbcccc");
  ASSERT_TRUE(in.FillTo(4).ok());
  EXPECT_EQ(in.available(), 12u) << "one receive takes every frame sent so far";
  EXPECT_EQ(std::string(in.data(), 4), "aaaa");
  in.Consume(4);
  ASSERT_TRUE(in.FillTo(8).ok());
  EXPECT_EQ(std::string(in.data(), 8), "bbbbcccc");
  in.Consume(8);
  EXPECT_EQ(in.available(), 0u);
}

TEST_F(StreamReaderTest, FillToMovesTheRestToMakeRoomAndWaitsForTheMissingBytes) {
  StreamReader in(fds_[0], nullptr, 8);
  Send("0123456");
  ASSERT_TRUE(in.FillTo(3).ok());
  in.Consume(5);  // "56" left at the end of the buffer
  Send("789ab");
  ASSERT_TRUE(in.FillTo(6).ok()) << "the 2 bytes left move to the front: 6 fit";
  EXPECT_EQ(std::string(in.data(), 6), "56789a");
}

TEST_F(StreamReaderTest, ReadToTakesTheBufferedBytesThenTheSocket) {
  StreamReader in(fds_[0], nullptr, 16);
  Send("head");
  ASSERT_TRUE(in.FillTo(2).ok());
  const std::string big(1000, 'x');
  Send(big);
  std::string out(1004, '\0');
  ASSERT_TRUE(in.ReadTo(out.data(), out.size()).ok());
  EXPECT_EQ(out, "head" + big);
  EXPECT_EQ(in.available(), 0u);
}

TEST_F(StreamReaderTest, ATimeoutAsksTheCallerWhoMayGoOnOrStop) {
  SetReceiveTimeout(fds_[0], absl::Milliseconds(20));
  StreamReader in(fds_[0], nullptr);
  int asked = 0;
  bool sent = false;
  auto on_timeout = [&]() -> absl::Status {
    if (++asked == 2 && !sent) {
      Send("late");
      sent = true;
    }
    return asked < 5 ? absl::OkStatus() : absl::AbortedError("given up");
  };
  ASSERT_TRUE(in.FillTo(4, on_timeout).ok());
  EXPECT_EQ(asked, 2) << "waited on after the first timeout, until the bytes came";
  in.Consume(4);
  asked = 0;
  EXPECT_EQ(in.FillTo(1, on_timeout).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(asked, 5);
  EXPECT_EQ(in.FillTo(1).code(), absl::StatusCode::kDeadlineExceeded)
      << "without a callback the timeout is the error";
}

TEST_F(StreamReaderTest, TheEndOfTheStreamSaysWhetherItFellBetweenFrames) {
  StreamReader in(fds_[0], nullptr);
  Send("ab");
  CloseWriter();
  bool clean = true;
  EXPECT_EQ(in.FillTo(4, nullptr, &clean).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(clean) << "2 bytes of the frame had come";
  in.Consume(2);
  EXPECT_EQ(in.FillTo(4, nullptr, &clean).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(clean);
}

}  // namespace
}  // namespace ringcache
