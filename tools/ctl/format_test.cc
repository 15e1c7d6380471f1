// Tests of ringcachectl's output formatting: sizes, rates, tables and JSON text.
#include "tools/ctl/format.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "gtest/gtest.h"

namespace ringcache::ctl {
namespace {

TEST(CtlFormatTest, BytesSmallValuesAreExactBytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1), "1 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
}

TEST(CtlFormatTest, BytesBinaryUnitsWithOneDecimal) {
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(4ull << 20), "4.0 MiB");
  EXPECT_EQ(FormatBytes(1ull << 30), "1.0 GiB");
  EXPECT_EQ(FormatBytes(10ull << 30), "10.0 GiB");
  EXPECT_EQ(FormatBytes((3ull << 40) / 2), "1.5 TiB");
  EXPECT_EQ(FormatBytes(1ull << 50), "1.0 PiB");
  EXPECT_EQ(FormatBytes(std::numeric_limits<uint64_t>::max()), "16.0 EiB");
}

TEST(CtlFormatTest, BytesRoundingCarriesToTheNextUnit) {
  // 1023.96 KiB would print as "1024.0 KiB"; it reads better as the next unit.
  EXPECT_EQ(FormatBytes((1ull << 20) - 40), "1.0 MiB");
  EXPECT_EQ(FormatBytes((1ull << 20) - 200), "1023.8 KiB");
}

TEST(CtlFormatTest, RateUnits) {
  EXPECT_EQ(FormatRate(0), "0 B/s");
  EXPECT_EQ(FormatRate(512.4), "512 B/s");
  EXPECT_EQ(FormatRate(12.3 * 1024 * 1024), "12.3 MiB/s");
  EXPECT_EQ(FormatRate(-1), "-");
  EXPECT_EQ(FormatRate(std::nan("")), "-");
}

TEST(CtlFormatTest, PercentOneDecimal) {
  EXPECT_EQ(FormatPercent(0), "0.0%");
  EXPECT_EQ(FormatPercent(0.5), "50.0%");
  EXPECT_EQ(FormatPercent(1), "100.0%");
  EXPECT_EQ(FormatPercent(2.0 / 3), "66.7%");
  EXPECT_EQ(FormatPercent(std::numeric_limits<double>::infinity()), "-");
}

TEST(CtlFormatTest, FixedDecimals) {
  EXPECT_EQ(FormatFixed(3.14159, 3), "3.142");
  EXPECT_EQ(FormatFixed(2, 1), "2.0");
  EXPECT_EQ(FormatFixed(2.5, 0), "2");  // round half to even, as printf does
  EXPECT_EQ(FormatFixed(std::nan(""), 2), "-");
}

TEST(CtlFormatTest, TableAlignsColumnsWithoutTrailingSpaces) {
  Table t({{"NAME"}, {"SIZE", Table::Align::kRight}, {"MODE"}});
  t.AddRow({"demo", "1.0 GiB", "writeback"});
  t.AddRow({"a-much-longer-name", "512 B", ""});
  std::ostringstream out;
  t.Render(out);
  EXPECT_EQ(out.str(),
            "NAME                   SIZE  MODE\n"
            "demo                1.0 GiB  writeback\n"
            "a-much-longer-name    512 B\n");
  EXPECT_EQ(t.rows(), 2u);
}

TEST(CtlFormatTest, TableHeaderOnlyWhenEmpty) {
  Table t({{"ROLE"}, {"ID", Table::Align::kRight}});
  std::ostringstream out;
  t.Render(out);
  EXPECT_EQ(out.str(), "ROLE  ID\n");
}

TEST(CtlFormatTest, TableShortRowsArePadded) {
  Table t({{"A"}, {"B"}});
  t.AddRow({"x"});
  std::ostringstream out;
  t.Render(out);
  EXPECT_EQ(out.str(), "A  B\nx\n");
}

TEST(CtlFormatTest, FieldsValuesLineUp) {
  std::ostringstream out;
  RenderFields({{"epoch", "1"}, {"dirty", "0 B"}, {"VDIs", "2"}}, out);
  EXPECT_EQ(out.str(),
            "epoch:  1\n"
            "dirty:  0 B\n"
            "VDIs:   2\n");
}

TEST(CtlFormatTest, JsonQuoteEscapesSpecialCharacters) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("line\nnext\ttab"), "\"line\\nnext\\ttab\"");
  EXPECT_EQ(JsonQuote(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(JsonQuote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}

TEST(CtlFormatTest, JsonNestedObjectsAndArrays) {
  JsonWriter j;
  j.BeginObject()
      .Field("epoch", uint64_t{1})
      .Key("nodes")
      .BeginArray()
      .BeginObject()
      .Field("role", "cachenode")
      .Field("id", uint32_t{1})
      .EndObject()
      .BeginObject()
      .Field("role", "datanode")
      .Field("id", uint32_t{2})
      .EndObject()
      .EndArray()
      .Field("ok", true)
      .Field("ratio", 0.5)
      .EndObject();
  EXPECT_EQ(j.str(),
            "{\"epoch\":1,\"nodes\":[{\"role\":\"cachenode\",\"id\":1},"
            "{\"role\":\"datanode\",\"id\":2}],\"ok\":true,\"ratio\":0.5}");
}

TEST(CtlFormatTest, JsonEmptyContainers) {
  EXPECT_EQ(JsonWriter().BeginArray().EndArray().str(), "[]");
  EXPECT_EQ(JsonWriter().BeginObject().EndObject().str(), "{}");
  EXPECT_EQ(
      JsonWriter().BeginArray().BeginObject().EndObject().BeginArray().EndArray().EndArray().str(),
      "[{},[]]");
}

TEST(CtlFormatTest, JsonNumbersRoundTripAndNonFiniteIsNull) {
  JsonWriter j;
  j.BeginArray()
      .Uint(std::numeric_limits<uint64_t>::max())
      .Double(0.1)
      .Double(3)
      .Double(std::nan(""))
      .Double(-std::numeric_limits<double>::infinity())
      .Bool(false)
      .String("x")
      .EndArray();
  EXPECT_EQ(j.str(), "[18446744073709551615,0.1,3,null,null,false,\"x\"]");
}

TEST(FormatTest, DurationsAndProgress) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(44.6), "45s");
  EXPECT_EQ(FormatDuration(200), "3m20s");
  EXPECT_EQ(FormatDuration(7500), "2h05m");
  EXPECT_EQ(FormatDuration(-1), "-");
  Progress p = ProgressOf(100, 25, 5);
  EXPECT_DOUBLE_EQ(p.done, 0.75);
  EXPECT_DOUBLE_EQ(p.eta_seconds, 5);
  EXPECT_DOUBLE_EQ(ProgressOf(100, 25, 0).eta_seconds, -1);  // no rate yet: unknown
  EXPECT_DOUBLE_EQ(ProgressOf(0, 0, 0).done, 1);
  EXPECT_DOUBLE_EQ(ProgressOf(0, 0, 0).eta_seconds, 0);
  EXPECT_DOUBLE_EQ(ProgressOf(10, 20, 1).done, 0);  // grew past the start: measured from the peak
  EXPECT_EQ(FormatDirtyProgress(4 << 20, 1 << 20, 1 << 20),
            "1.0 MiB dirty left, 75.0% done, 1.0 MiB/s, ETA 1s");
  EXPECT_EQ(FormatDirtyProgress(4 << 20, 1 << 20, 0),
            "1.0 MiB dirty left, 75.0% done, 0 B/s, ETA -");
}

}  // namespace
}  // namespace ringcache::ctl
