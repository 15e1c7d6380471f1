// Tests of the MSR, SPC and FIU readers, format detection, gzip input and malformed lines.
#include "tools/sim/text_formats.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/sim/trace_io.h"

namespace ringcache::sim {
namespace {

using ::testing::HasSubstr;

const std::string kData = RC_SIM_TEST_DATA_DIR;

std::vector<Request> ReadAll(RequestSource& src) {
  std::vector<Request> all;
  std::vector<Request> batch(3);  // small batches exercise the batching paths
  while (true) {
    absl::StatusOr<size_t> n = src.Read(absl::MakeSpan(batch));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) break;
    all.insert(all.end(), batch.begin(), batch.begin() + *n);
  }
  return all;
}

TextReaderOptions Collect(std::vector<std::string>* messages, bool strict = false) {
  TextReaderOptions o;
  o.strict = strict;
  o.report = [messages](const std::string& m) { messages->push_back(m); };
  return o;
}

TEST(SimTextFormats, ParsesMsrLine) {
  ParsedLine p;
  ASSERT_TRUE(ParseMsrLine("128166372003061629,hm,1,Write,6025737728,8192,12115", &p).ok());
  EXPECT_EQ(p.time_us, 12816637200306162u);
  EXPECT_EQ(p.vdi_key, "hm:1");
  EXPECT_EQ(p.offset, 6025737728u);
  EXPECT_EQ(p.length, 8192u);
  EXPECT_EQ(p.op, Op::kWrite);
  ASSERT_TRUE(ParseMsrLine("1,hm,1,read,0,512,1", &p).ok());  // case-insensitive type
  EXPECT_EQ(p.op, Op::kRead);
}

TEST(SimTextFormats, ParsesSpcLine) {
  ParsedLine p;
  ASSERT_TRUE(ParseSpcLine("0,20941264,8192,W,0.551706", &p).ok());
  EXPECT_EQ(p.offset, uint64_t{20941264} * 512);
  EXPECT_EQ(p.length, 8192u);
  EXPECT_EQ(p.op, Op::kWrite);
  EXPECT_EQ(p.time_us, 551706u);
  EXPECT_EQ(p.vdi_key, "asu0");
  ASSERT_TRUE(ParseSpcLine("3,8,512,r,12.5", &p).ok());
  EXPECT_EQ(p.op, Op::kRead);
  EXPECT_EQ(p.time_us, 12500000u);
  EXPECT_EQ(p.vdi_key, "asu3");
}

TEST(SimTextFormats, ParsesFiuLineWithSpacesInProcessName) {
  ParsedLine p;
  ASSERT_TRUE(
      ParseFiuLine("89155254592030 4335 ata sff worker 904520 16 W 8 32 5c5bd4e4d0d6e7f8", &p)
          .ok());
  EXPECT_EQ(p.time_us, 89155254592u);
  EXPECT_EQ(p.offset, 904520u * 512);
  EXPECT_EQ(p.length, 16u * 512);
  EXPECT_EQ(p.op, Op::kWrite);
  EXPECT_EQ(p.vdi_key, "8:32");
}

TEST(SimTextFormats, MalformedLinesSayWhatIsWrong) {
  ParsedLine p;
  EXPECT_THAT(ParseMsrLine("1,hm,1,Rd,0,512,1", &p).message(), HasSubstr("Type must be"));
  EXPECT_THAT(ParseMsrLine("1,hm,1,Read,0,512", &p).message(), HasSubstr("7 comma-separated"));
  EXPECT_THAT(ParseMsrLine("1,hm,1,Read,0,0,1", &p).message(), HasSubstr("size is 0"));
  EXPECT_THAT(ParseMsrLine("1,hm,1,Read,-5,512,1", &p).message(), HasSubstr("Offset"));
  EXPECT_THAT(ParseSpcLine("0,8,512,x,1.0", &p).message(), HasSubstr("Opcode"));
  EXPECT_THAT(ParseSpcLine("0,8,512,r,-1", &p).message(), HasSubstr("Timestamp"));
  EXPECT_THAT(ParseSpcLine("0,8,512,r", &p).message(), HasSubstr("5 comma-separated"));
  EXPECT_THAT(ParseFiuLine("1 2 p 8 8 Q 8 0 md5", &p).message(), HasSubstr("op must be"));
  EXPECT_THAT(ParseFiuLine("1 2 p 8 8 R", &p).message(), HasSubstr("9 whitespace"));
  EXPECT_THAT(ParseMsrLine("1,hm,1,Read,0,4294967296,1", &p).message(), HasSubstr("2 GiB"));
}

TEST(SimTextFormats, DetectsFormats) {
  EXPECT_EQ(*DetectTextFormat("128166372003061629,hm,1,Write,6025737728,8192,12115"),
            TraceFormat::kMsr);
  EXPECT_EQ(*DetectTextFormat("0,20941264,8192,W,0.551706"), TraceFormat::kSpc);
  EXPECT_EQ(*DetectTextFormat("1 2 p 8 8 R 8 0 md5"), TraceFormat::kFiu);
  EXPECT_EQ(*DetectTextFormat("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime"),
            TraceFormat::kMsr);
  EXPECT_FALSE(DetectTextFormat("hello world").ok());
  EXPECT_EQ(*DetectTraceFormat(kData + "/msr_tiny.csv"), TraceFormat::kMsr);
  EXPECT_EQ(*DetectTraceFormat(kData + "/msr_tiny.csv.gz"), TraceFormat::kMsr);
  EXPECT_EQ(*DetectTraceFormat(kData + "/spc_tiny.spc"), TraceFormat::kSpc);
  EXPECT_EQ(*DetectTraceFormat(kData + "/fiu_tiny.txt"), TraceFormat::kFiu);
}

TEST(SimTextFormats, ReadsMsrFileAndMapsDisksToVdis) {
  std::vector<std::string> msgs;
  auto src = OpenTraceFile(kData + "/msr_tiny.csv", TraceFormat::kAuto, Collect(&msgs));
  ASSERT_TRUE(src.ok()) << src.status();
  std::vector<Request> all = ReadAll(**src);
  ASSERT_EQ(all.size(), 24u);
  EXPECT_TRUE(msgs.empty());
  EXPECT_EQ(all[0].time_us, 0u);  // rebased to the first request
  EXPECT_EQ(all[1].time_us, 1235u);  // FILETIME/10 each: 12816637200307397 - 12816637200306162
  EXPECT_EQ(all[1].offset, 4096u);
  EXPECT_EQ(all[1].length, 8192u);
  EXPECT_EQ(all[2].op, Op::kWrite);
  EXPECT_EQ(all[0].vdi, 0u);
  EXPECT_EQ(all[3].vdi, 1u);  // usr:1 appears fourth
  EXPECT_EQ((*src)->VdiNames(), (std::vector<std::string>{"usr:0", "usr:1"}));
  EXPECT_EQ((*src)->stats().requests, 24u);
  EXPECT_EQ((*src)->stats().malformed, 0u);
}

TEST(SimTextFormats, GzipInputReadsTheSameRequests) {
  std::vector<std::string> msgs;
  auto plain = OpenTraceFile(kData + "/msr_tiny.csv", TraceFormat::kMsr, Collect(&msgs));
  auto gz = OpenTraceFile(kData + "/msr_tiny.csv.gz", TraceFormat::kAuto, Collect(&msgs));
  ASSERT_TRUE(plain.ok() && gz.ok());
  std::vector<Request> a = ReadAll(**plain), b = ReadAll(**gz);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].offset, b[i].offset);
    EXPECT_EQ(a[i].time_us, b[i].time_us);
    EXPECT_EQ(a[i].op, b[i].op);
  }
}

TEST(SimTextFormats, GzipWrittenAtRuntimeWithCrlfAndNoFinalNewline) {
  std::string path = ::testing::TempDir() + "/sim_spc_crlf.gz";
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  std::string text = "0,8,4096,r,0.5\r\n1,16,8192,W,1.5";
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  std::vector<std::string> msgs;
  auto src = OpenTraceFile(path, TraceFormat::kAuto, Collect(&msgs));
  ASSERT_TRUE(src.ok()) << src.status();
  std::vector<Request> all = ReadAll(**src);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].time_us, 1000000u);
  EXPECT_EQ(all[1].op, Op::kWrite);
  EXPECT_EQ(all[1].vdi, 1u);
  std::remove(path.c_str());
}

TEST(SimTextFormats, ReadsSpcAndFiuFiles) {
  std::vector<std::string> msgs;
  auto spc = OpenTraceFile(kData + "/spc_tiny.spc", TraceFormat::kAuto, Collect(&msgs));
  ASSERT_TRUE(spc.ok());
  std::vector<Request> s = ReadAll(**spc);
  ASSERT_EQ(s.size(), 20u);
  EXPECT_EQ(s[1].offset, 8u * 512);
  EXPECT_EQ(s[1].op, Op::kRead);  // "R"
  EXPECT_EQ(s[2].op, Op::kWrite);  // "w"
  EXPECT_EQ(s[2].vdi, 1u);
  auto fiu = OpenTraceFile(kData + "/fiu_tiny.txt", TraceFormat::kAuto, Collect(&msgs));
  ASSERT_TRUE(fiu.ok());
  std::vector<Request> f = ReadAll(**fiu);
  ASSERT_EQ(f.size(), 20u);
  EXPECT_EQ(f[3].length, 16u * 512);
  EXPECT_EQ(f[4].vdi, 1u);  // 8:16
  EXPECT_EQ((*fiu)->VdiNames(), (std::vector<std::string>{"8:0", "8:16"}));
  EXPECT_TRUE(msgs.empty());
}

TEST(SimTextFormats, MalformedLinesAreSkippedCountedAndReported) {
  struct Case {
    std::string file;
    size_t good;
    uint64_t bad;
    std::string first;  // expected start of the first report
  };
  std::vector<Case> cases = {
      {"msr_malformed.csv", 2, 5, "msr_malformed.csv:3: Type must be Read or Write, got 'Rd'"},
      {"spc_malformed.spc", 2, 4, "spc_malformed.spc:2: Opcode must be R or W, got 'x'"},
      {"fiu_malformed.txt", 2, 4, "fiu_malformed.txt:2: op must be R or W, got 'Q'"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> msgs;
    auto src = OpenTraceFile(kData + "/" + c.file, TraceFormat::kAuto, Collect(&msgs));
    ASSERT_TRUE(src.ok()) << c.file << ": " << src.status();
    std::vector<Request> all = ReadAll(**src);
    EXPECT_EQ(all.size(), c.good) << c.file;
    EXPECT_EQ((*src)->stats().malformed, c.bad) << c.file;
    ASSERT_EQ(msgs.size(), c.bad) << c.file;
    EXPECT_THAT(msgs[0], HasSubstr(c.first));
    EXPECT_THAT((*src)->stats().first_error, HasSubstr(c.first));
  }
}

TEST(SimTextFormats, StrictModeStopsAtTheFirstMalformedLine) {
  std::vector<std::string> msgs;
  auto src = OpenTraceFile(kData + "/msr_malformed.csv", TraceFormat::kMsr,
                           Collect(&msgs, /*strict=*/true));
  ASSERT_TRUE(src.ok());
  std::vector<Request> batch(16);
  absl::StatusOr<size_t> n = (*src)->Read(absl::MakeSpan(batch));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(), HasSubstr("msr_malformed.csv:3: Type must be"));
}

TEST(SimTextFormats, ReportsOnlyTheFirstFewMalformedLines) {
  std::string path = ::testing::TempDir() + "/sim_many_bad.csv";
  {
    std::ofstream f(path);
    f << "1,h,0,Read,0,4096,1\n";
    for (int i = 0; i < 30; ++i) f << "1,h,0,Oops,0,4096,1\n";
  }
  std::vector<std::string> msgs;
  TextReaderOptions o = Collect(&msgs);
  o.max_reported = 3;
  auto src = OpenTraceFile(path, TraceFormat::kMsr, o);
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(ReadAll(**src).size(), 1u);
  EXPECT_EQ((*src)->stats().malformed, 30u);
  EXPECT_EQ(msgs.size(), 4u);  // 3 lines + "counting silently"
  std::remove(path.c_str());
}

TEST(SimTextFormats, MissingFileIsNotFound) {
  auto src = OpenTraceFile(kData + "/no_such_file.csv", TraceFormat::kMsr, {});
  EXPECT_EQ(src.status().code(), absl::StatusCode::kNotFound);
}

TEST(SimTextFormats, BinaryGarbageAsTextIsReportedNotCrashing) {
  std::string path = ::testing::TempDir() + "/sim_garbage.txt";
  {
    std::ofstream f(path, std::ios::binary);
    f << "1,h,0,Read,0,4096,1\n";
    for (int i = 0; i < 200000; ++i) f.put(static_cast<char>('A' + i % 26));
  }
  std::vector<std::string> msgs;
  auto src = OpenTraceFile(path, TraceFormat::kMsr, Collect(&msgs));
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(ReadAll(**src).size(), 1u);
  EXPECT_EQ((*src)->stats().malformed, 1u);
  EXPECT_THAT(msgs[0], HasSubstr("line longer than"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ringcache::sim
