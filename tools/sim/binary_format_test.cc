// Tests of the binary trace format: round trip, VDI names, validation, truncation, gzip.
#include "tools/sim/binary_format.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/sim/generators.h"
#include "tools/sim/trace_io.h"

namespace ringcache::sim {
namespace {

using ::testing::HasSubstr;

std::vector<Request> ReadAll(RequestSource& src, size_t batch_size = 7) {
  std::vector<Request> all, batch(batch_size);
  while (true) {
    absl::StatusOr<size_t> n = src.Read(absl::MakeSpan(batch));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) break;
    all.insert(all.end(), batch.begin(), batch.begin() + *n);
  }
  return all;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void Spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST(SimBinaryFormat, RoundTripsRequestsAndNames) {
  std::string path = ::testing::TempDir() + "/sim_rt.bin";
  auto w = BinaryTraceWriter::Create(path, 4096);
  ASSERT_TRUE(w.ok());
  std::vector<Request> in;
  for (uint32_t i = 0; i < 1000; ++i) {
    Request r;
    r.time_us = uint64_t{i} * 1000003;
    r.offset = (uint64_t{i} << 33) + i * 512;
    r.length = 512 + (i % 100) * 4096;
    r.vdi = i % 3 == 0 ? 2 : 0;
    r.op = i % 5 == 0 ? Op::kWrite : Op::kRead;
    in.push_back(r);
    ASSERT_TRUE((*w)->Append(r).ok());
  }
  ASSERT_TRUE((*w)->Close({"alpha", "", "gamma"}).ok());
  // Header: 64 bytes, records, then the name table.
  EXPECT_EQ(Slurp(path).size(), 64u + 1000 * 24 + 4 + (6 + 5) * 2);

  auto r = BinaryTraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->record_count(), 1000u);
  EXPECT_EQ((*r)->unit_bytes(), 4096u);
  std::vector<Request> out = ReadAll(**r);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].time_us, in[i].time_us);
    EXPECT_EQ(out[i].offset, in[i].offset);
    EXPECT_EQ(out[i].length, in[i].length);
    EXPECT_EQ(out[i].vdi, in[i].vdi);
    EXPECT_EQ(out[i].op, in[i].op);
  }
  EXPECT_EQ((*r)->VdiNames(), (std::vector<std::string>{"alpha", "", "gamma"}));
  std::remove(path.c_str());
}

TEST(SimBinaryFormat, HeaderLayoutIsAsDocumented) {
  std::string path = ::testing::TempDir() + "/sim_hdr.bin";
  auto w = BinaryTraceWriter::Create(path);
  Request r;
  r.time_us = 0x0102030405060708ULL;
  r.offset = 0x1122334455667788ULL;
  r.length = 4096;
  r.vdi = 7;
  r.op = Op::kWrite;
  ASSERT_TRUE((*w)->Append(r).ok());
  ASSERT_TRUE((*w)->Close({}).ok());
  std::string b = Slurp(path);
  ASSERT_EQ(b.size(), 64u + 24u);
  EXPECT_EQ(b.substr(0, 8), std::string("RCTRACE\0", 8));
  EXPECT_EQ(static_cast<unsigned char>(b[8]), 1);    // version
  EXPECT_EQ(static_cast<unsigned char>(b[12]), 24);  // record size
  EXPECT_EQ(static_cast<unsigned char>(b[16]), 1);   // count
  EXPECT_EQ(static_cast<unsigned char>(b[64]), 0x08);  // time_us LE
  EXPECT_EQ(static_cast<unsigned char>(b[72]), 0x88);  // offset LE
  EXPECT_EQ(static_cast<unsigned char>(b[64 + 16 + 3]), 0x80);  // write flag, bit 31
  EXPECT_EQ(static_cast<unsigned char>(b[64 + 16 + 1]), 0x10);  // 4096
  EXPECT_EQ(static_cast<unsigned char>(b[64 + 20]), 7);         // vdi
  std::remove(path.c_str());
}

TEST(SimBinaryFormat, RejectsBadMagicVersionAndTruncation) {
  std::string path = ::testing::TempDir() + "/sim_bad.bin";
  Spit(path, "NOTATRACE");
  EXPECT_THAT(BinaryTraceReader::Open(path).status().message(), HasSubstr("bad magic"));

  auto w = BinaryTraceWriter::Create(path);
  Request r;
  r.length = 4096;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*w)->Append(r).ok());
  ASSERT_TRUE((*w)->Close({}).ok());
  std::string good = Slurp(path);

  std::string bad_version = good;
  bad_version[8] = 9;
  Spit(path, bad_version);
  EXPECT_THAT(BinaryTraceReader::Open(path).status().message(), HasSubstr("version 9"));

  Spit(path, good.substr(0, good.size() - 30));  // cut inside record 8
  auto rd = BinaryTraceReader::Open(path);
  ASSERT_TRUE(rd.ok());
  std::vector<Request> batch(100);
  absl::StatusOr<size_t> n = (*rd)->Read(absl::MakeSpan(batch));
  if (n.ok()) n = (*rd)->Read(absl::MakeSpan(batch));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss);
  std::remove(path.c_str());
}

TEST(SimBinaryFormat, UnfinishedFileIsReadToItsEnd) {
  std::string path = ::testing::TempDir() + "/sim_unfinished.bin";
  {
    auto w = BinaryTraceWriter::Create(path);
    Request r;
    r.length = 512;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE((*w)->Append(r).ok());
    ASSERT_TRUE((*w)->Close({}).ok());
  }
  std::string b = Slurp(path);
  for (int i = 16; i < 24; ++i) b[i] = static_cast<char>(0xff);  // count = unknown
  Spit(path, b);
  auto rd = BinaryTraceReader::Open(path);
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ((*rd)->record_count(), kUnknownCount);
  EXPECT_EQ(ReadAll(**rd).size(), 5u);
  std::remove(path.c_str());
}

TEST(SimBinaryFormat, GzipCompressedBinaryIsDetectedAndRead) {
  std::string path = ::testing::TempDir() + "/sim_gz.bin";
  auto gen = MakeGenerators({"zipf:blocks=1000,requests=5000,write=0.3,seed=3"});
  ASSERT_TRUE(gen.ok());
  ASSERT_TRUE(WriteBinaryTrace(**gen, path).ok());
  std::string raw = Slurp(path);
  std::string gz_path = path + ".gz";
  gzFile gz = gzopen(gz_path.c_str(), "wb");
  gzwrite(gz, raw.data(), static_cast<unsigned>(raw.size()));
  gzclose(gz);
  EXPECT_EQ(*DetectTraceFormat(gz_path), TraceFormat::kBinary);
  auto a = OpenTraceFile(path, TraceFormat::kAuto, {});
  auto b = OpenTraceFile(gz_path, TraceFormat::kAuto, {});
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<Request> ra = ReadAll(**a, 4096), rb = ReadAll(**b, 333);
  ASSERT_EQ(ra.size(), 5000u);
  ASSERT_EQ(rb.size(), 5000u);
  for (size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(ra[i].offset, rb[i].offset);
  EXPECT_EQ((*b)->VdiNames(), (std::vector<std::string>{"vdi0"}));
  std::remove(path.c_str());
  std::remove(gz_path.c_str());
}

TEST(SimBinaryFormat, ConvertKeepsTextTraceRequestsAndNames) {
  std::string path = ::testing::TempDir() + "/sim_conv.bin";
  auto text = OpenTraceFile(std::string(RC_SIM_TEST_DATA_DIR) + "/fiu_tiny.txt",
                            TraceFormat::kFiu, {});
  ASSERT_TRUE(text.ok());
  absl::StatusOr<uint64_t> n = WriteBinaryTrace(**text, path);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 20u);
  auto again = OpenTraceFile(std::string(RC_SIM_TEST_DATA_DIR) + "/fiu_tiny.txt",
                             TraceFormat::kFiu, {});
  auto bin = OpenTraceFile(path, TraceFormat::kAuto, {});
  std::vector<Request> a = ReadAll(**again), b = ReadAll(**bin);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].offset, b[i].offset);
    EXPECT_EQ(a[i].length, b[i].length);
    EXPECT_EQ(a[i].vdi, b[i].vdi);
    EXPECT_EQ(a[i].time_us, b[i].time_us);
  }
  EXPECT_EQ((*bin)->VdiNames(), (std::vector<std::string>{"8:0", "8:16"}));
  std::remove(path.c_str());
}

TEST(SimBinaryFormat, WriterRejectsLengthsOutsideTheFormat) {
  std::string path = ::testing::TempDir() + "/sim_len.bin";
  auto w = BinaryTraceWriter::Create(path);
  Request r;
  r.length = 0;
  EXPECT_FALSE((*w)->Append(r).ok());
  r.length = 1u << 31;
  EXPECT_FALSE((*w)->Append(r).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ringcache::sim
