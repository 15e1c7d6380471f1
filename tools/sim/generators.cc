// Synthetic workload generators. See generators.h.
#include "tools/sim/generators.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringcache::sim {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) {
    x += 0x9e3779b97f4a7c15ULL;
    s = Mix64(x);
  }
}

uint64_t Rng::Next() {
  auto rotl = [](uint64_t v, int k) { return (v << k) | (v >> (64 - k)); };
  uint64_t result = rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

namespace {

// log1p(x)/x and expm1(x)/x, continuous at 0.
double Log1pOverX(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
double Expm1OverX(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

}  // namespace

// The rejection-inversion method uses a continuous hat h(x) = x^-theta, its integral
// H(x) = (x^(1-theta) - 1) / (1 - theta) (log x when theta = 1), written with expm1/log1p so
// theta near 1 stays accurate.
ZipfSampler::ZipfSampler(uint64_t n, double theta) : n_(n), theta_(theta) {
  h_x1_ = H(1.5) - 1.0;
  h_n_ = H(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HInverse(H(2.5) - std::exp(-theta_ * std::log(2.0)));
}

double ZipfSampler::H(double x) const {
  double log_x = std::log(x);
  return Expm1OverX((1.0 - theta_) * log_x) * log_x;
}

double ZipfSampler::HInverse(double x) const {
  double t = x * (1.0 - theta_);
  if (t < -1.0) t = -1.0;
  return std::exp(Log1pOverX(t) * x);
}

uint64_t ZipfSampler::Sample(Rng& rng) const {
  if (n_ <= 1) return 1;
  while (true) {
    double u = h_n_ + rng.Uniform() * (h_x1_ - h_n_);
    double x = HInverse(u);
    double kd = std::floor(x + 0.5);
    uint64_t k = kd < 1 ? 1 : (kd > static_cast<double>(n_) ? n_ : static_cast<uint64_t>(kd));
    double kk = static_cast<double>(k);
    if (kk - x <= s_ || u >= H(kk + 0.5) - std::exp(-theta_ * std::log(kk))) return k;
  }
}

namespace {

struct KindInfo {
  absl::string_view kind;
  std::vector<std::pair<absl::string_view, absl::string_view>> keys;  // key, default
  absl::string_view help;
};

const std::vector<std::pair<absl::string_view, absl::string_view>>& CommonKeys() {
  static const auto* keys = new std::vector<std::pair<absl::string_view, absl::string_view>>{
      {"requests", "1000000"}, {"seed", "1"},   {"write", "0"},   {"vdi", "0"},
      {"size", "1"},           {"unit", "4096"}, {"base", "0"},   {"iat_us", "100"},
      {"start_us", "0"}};
  return *keys;
}

const std::vector<KindInfo>& Kinds() {
  static const auto* kinds = new std::vector<KindInfo>{
      {"zipf", {{"blocks", "100000"}, {"theta", "0.99"}, {"scatter", "1"}},
       "Zipf(theta) over `blocks` blocks"},
      {"uniform", {{"blocks", "100000"}}, "uniform over `blocks` blocks"},
      {"scan", {{"blocks", "100000"}, {"loops", "0"}},
       "sequential passes over `blocks` blocks (loops>0 sets requests = loops*blocks/size)"},
      {"seqwrite", {{"blocks", "100000"}, {"loops", "0"}},
       "scan with write=1 (sequential write stream)"},
      {"hotspot",
       {{"blocks", "1000000"},
        {"areas", "4"},
        {"area", "16384"},
        {"window", "256"},
        {"density", "0.5"},
        {"cycle", "10000"},
        {"hot", "0.7"},
        {"step", "0"}},
       "moving regional hot spots (paper 000 Table I); step=0 means step=window"},
      {"multi",
       {{"vdis", "4"}, {"blocks", "100000"}, {"theta", "0.99"}, {"skew", "1"}, {"rates", ""}},
       "several VDIs, Zipf each; blocks/theta/write may be '/' lists, one value per VDI"},
  };
  return *kinds;
}

const KindInfo* FindKind(absl::string_view kind) {
  for (const KindInfo& k : Kinds()) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

// Typed access to a spec's parameters, with defaults and range checks. The first error sticks.
class Params {
 public:
  explicit Params(const GeneratorSpec& spec) : spec_(spec) {}

  std::string Raw(absl::string_view key) const {
    auto it = spec_.params.find(std::string(key));
    if (it != spec_.params.end()) return it->second;
    for (const auto& [k, d] : CommonKeys()) {
      if (k == key) return std::string(d);
    }
    const KindInfo* info = FindKind(spec_.kind);
    for (const auto& [k, d] : info->keys) {
      if (k == key) return std::string(d);
    }
    return "";
  }

  uint64_t U64(absl::string_view key, uint64_t min, uint64_t max) {
    std::string v = Raw(key);
    double d = 0;
    uint64_t out = 0;
    // Accept 1e6 style too.
    if (!absl::SimpleAtoi(v, &out)) {
      if (absl::SimpleAtod(v, &d) && d >= 0 && d < 1.8e19 && d == std::floor(d)) {
        out = static_cast<uint64_t>(d);
      } else {
        Fail(absl::StrCat(key, "=", v, " is not a non-negative integer"));
        return min;
      }
    }
    if (out < min || out > max) {
      Fail(absl::StrCat(key, "=", v, " is out of range [", min, ", ", max, "]"));
      return min;
    }
    return out;
  }

  double Double(absl::string_view key, double min, double max) {
    std::string v = Raw(key);
    double d = 0;
    if (!absl::SimpleAtod(v, &d) || !std::isfinite(d)) {
      Fail(absl::StrCat(key, "=", v, " is not a number"));
      return min;
    }
    if (d < min || d > max) {
      Fail(absl::StrCat(key, "=", v, " is out of range [", min, ", ", max, "]"));
      return min;
    }
    return d;
  }

  // A '/'-separated list of `n` numbers; a single value is repeated.
  std::vector<double> DoubleList(absl::string_view key, size_t n, double min, double max) {
    std::string v = Raw(key);
    std::vector<std::string> parts = absl::StrSplit(v, '/');
    std::vector<double> out;
    for (const std::string& p : parts) {
      double d = 0;
      if (!absl::SimpleAtod(p, &d) || !std::isfinite(d) || d < min || d > max) {
        Fail(absl::StrCat(key, "=", v, ": '", p, "' is not a number in [", min, ", ", max, "]"));
        return std::vector<double>(n, min);
      }
      out.push_back(d);
    }
    if (out.size() == 1) out.resize(n, out[0]);
    if (out.size() != n) {
      Fail(absl::StrCat(key, "=", v, " has ", out.size(), " values, want 1 or ", n));
      return std::vector<double>(n, min);
    }
    return out;
  }

  void Fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
  }
  absl::Status status() const {
    if (error_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("--gen ", spec_.text, ": ", error_));
  }

 private:
  const GeneratorSpec& spec_;
  std::string error_;
};

struct Common {
  uint64_t requests;
  uint64_t seed;
  double write;
  uint32_t vdi;
  uint32_t size;
  uint32_t unit;
  uint64_t base;
  double iat_us;
  uint64_t start_us;
};

// `write_is_list`: the kind reads "write" itself (one value per VDI).
Common ReadCommon(Params& p, bool write_is_list) {
  Common c;
  c.requests = p.U64("requests", 0, uint64_t{1} << 40);
  c.seed = p.U64("seed", 0, ~uint64_t{0});
  c.write = write_is_list ? 0 : p.Double("write", 0, 1);
  c.vdi = static_cast<uint32_t>(p.U64("vdi", 0, (1u << 24)));
  c.unit = static_cast<uint32_t>(p.U64("unit", 512, 1u << 24));
  if (c.unit % 512 != 0) p.Fail(absl::StrCat("unit=", c.unit, " is not a multiple of 512"));
  c.size = static_cast<uint32_t>(p.U64("size", 1, 1u << 16));
  if (uint64_t{c.size} * c.unit >= (uint64_t{1} << 31)) {
    p.Fail("size*unit must stay below 2 GiB");
  }
  c.base = p.U64("base", 0, uint64_t{1} << 40);
  c.iat_us = p.Double("iat_us", 0, 1e9);
  c.start_us = p.U64("start_us", 0, uint64_t{1} << 50);
  return c;
}

// Base of the single-stream generators: timing, op choice, request count, names.
class Generator : public RequestSource {
 public:
  explicit Generator(const Common& c) : c_(c), rng_(c.seed) {}

  absl::StatusOr<size_t> Read(absl::Span<Request> out) override {
    size_t n = 0;
    while (n < out.size() && produced_ < c_.requests) {
      Request& r = out[n++];
      r.time_us = c_.start_us + static_cast<uint64_t>(static_cast<double>(produced_) * c_.iat_us);
      r.vdi = c_.vdi;
      uint64_t block = NextBlock(r);  // may set r.vdi
      r.offset = (c_.base + block) * c_.unit;
      r.length = c_.size * c_.unit;
      r.op = NextOp();
      ++produced_;
    }
    stats_.requests += n;
    return n;
  }

  std::vector<std::string> VdiNames() const override {
    std::vector<std::string> names;
    for (uint32_t v : Vdis()) {
      if (names.size() <= v) names.resize(v + 1);
      names[v] = absl::StrCat("vdi", v);
    }
    return names;
  }
  const SourceStats& stats() const override { return stats_; }

 protected:
  // Returns the first block (in units, before `base`) of the next request.
  virtual uint64_t NextBlock(Request& r) = 0;
  // Returns the op of the request whose block NextBlock() just chose.
  virtual Op NextOp() { return Draw(c_.write); }
  Op Draw(double write) {
    if (write >= 1.0) return Op::kWrite;
    if (write <= 0.0) return Op::kRead;
    return rng_.Uniform() < write ? Op::kWrite : Op::kRead;
  }
  virtual std::vector<uint32_t> Vdis() const { return {c_.vdi}; }

  Common c_;
  Rng rng_;
  uint64_t produced_ = 0;
  SourceStats stats_;
};

// Returns a multiplier coprime with n, so x -> (a*x + b) mod n permutes [0, n).
uint64_t CoprimeMultiplier(uint64_t n, uint64_t seed) {
  if (n <= 2) return 1;
  uint64_t a = (Mix64(seed ^ 0x5ca77e7ULL) % n) | 1;
  while (std::gcd(a, n) != 1) a = a + 1 < n ? a + 1 : 1;
  return a;
}

class ZipfGenerator : public Generator {
 public:
  ZipfGenerator(const Common& c, uint64_t blocks, double theta, bool scatter)
      : Generator(c), blocks_(blocks), span_(blocks - (c.size - 1)), zipf_(span_, theta),
        mul_(scatter ? CoprimeMultiplier(span_, c.seed) : 1),
        add_(scatter ? Mix64(c.seed) % span_ : 0) {}

 protected:
  uint64_t NextBlock(Request&) override {
    uint64_t rank = zipf_.Sample(rng_) - 1;
    return static_cast<uint64_t>((static_cast<unsigned __int128>(rank) * mul_ + add_) % span_);
  }

 private:
  uint64_t blocks_;
  uint64_t span_;  // first blocks a request may start at
  ZipfSampler zipf_;
  uint64_t mul_, add_;
};

class UniformGenerator : public Generator {
 public:
  UniformGenerator(const Common& c, uint64_t blocks)
      : Generator(c), span_(blocks - (c.size - 1)) {}

 protected:
  uint64_t NextBlock(Request&) override { return rng_.Below(span_); }

 private:
  uint64_t span_;
};

class ScanGenerator : public Generator {
 public:
  ScanGenerator(const Common& c, uint64_t blocks) : Generator(c), blocks_(blocks) {}

 protected:
  uint64_t NextBlock(Request&) override {
    if (pos_ + c_.size > blocks_) pos_ = 0;
    uint64_t b = pos_;
    pos_ += c_.size;
    return b;
  }

 private:
  uint64_t blocks_;
  uint64_t pos_ = 0;
};

class HotspotGenerator : public Generator {
 public:
  struct Shape {
    uint64_t blocks, areas, area, window, cycle, step;
    double density, hot;
  };
  HotspotGenerator(const Common& c, const Shape& s) : Generator(c), s_(s) {
    for (uint64_t k = 0; k < s_.areas; ++k) area_start_.push_back(k * (s_.blocks / s_.areas));
  }

 protected:
  uint64_t NextBlock(Request&) override {
    if (rng_.Uniform() >= s_.hot) return rng_.Below(s_.blocks - (c_.size - 1));
    uint64_t cycle = produced_ / s_.cycle;
    uint64_t k = rng_.Below(s_.areas);
    uint64_t window_start = (cycle * s_.step) % s_.area;
    // Rejection: draw window positions until one is a hot block (bounded, then take any).
    uint64_t block = 0;
    for (int attempt = 0; attempt < 64; ++attempt) {
      uint64_t j = rng_.Below(s_.window);
      uint64_t in_area = (window_start + j) % s_.area;
      if (in_area + c_.size > s_.area) in_area = s_.area - c_.size;
      block = area_start_[k] + in_area;
      if (IsHot(block)) break;
    }
    return block;
  }

 private:
  bool IsHot(uint64_t block) const {
    return static_cast<double>(Mix64(block ^ (c_.seed << 1)) >> 11) * 0x1.0p-53 < s_.density;
  }

  Shape s_;
  std::vector<uint64_t> area_start_;
};

class MultiVdiGenerator : public Generator {
 public:
  MultiVdiGenerator(const Common& c, std::vector<double> weights, std::vector<uint64_t> blocks,
                    std::vector<double> thetas, std::vector<double> writes)
      : Generator(c), writes_(std::move(writes)) {
    double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    double acc = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      acc += weights[i] / total;
      cumulative_.push_back(acc);
      spans_.push_back(blocks[i] - (c.size - 1));
      zipfs_.emplace_back(spans_.back(), thetas[i]);
      muls_.push_back(CoprimeMultiplier(spans_.back(), c.seed + i));
    }
    cumulative_.back() = 1.0;
  }

 protected:
  uint64_t NextBlock(Request& r) override {
    double u = rng_.Uniform();
    size_t i = 0;
    while (i + 1 < cumulative_.size() && u >= cumulative_[i]) ++i;
    r.vdi = c_.vdi + static_cast<uint32_t>(i);
    last_ = i;
    uint64_t rank = zipfs_[i].Sample(rng_) - 1;
    return static_cast<uint64_t>((static_cast<unsigned __int128>(rank) * muls_[i]) % spans_[i]);
  }
  Op NextOp() override { return Draw(writes_[last_]); }
  std::vector<uint32_t> Vdis() const override {
    std::vector<uint32_t> v;
    for (size_t i = 0; i < cumulative_.size(); ++i) v.push_back(c_.vdi + uint32_t(i));
    return v;
  }

 private:
  std::vector<double> cumulative_;
  std::vector<uint64_t> spans_;
  std::vector<ZipfSampler> zipfs_;
  std::vector<uint64_t> muls_;
  std::vector<double> writes_;
  size_t last_ = 0;
};

}  // namespace

absl::StatusOr<GeneratorSpec> ParseGeneratorSpec(absl::string_view text) {
  GeneratorSpec spec;
  spec.text = std::string(text);
  absl::string_view rest;
  size_t colon = text.find(':');
  spec.kind = std::string(absl::StripAsciiWhitespace(text.substr(0, colon)));
  if (colon != absl::string_view::npos) rest = text.substr(colon + 1);
  const KindInfo* info = FindKind(spec.kind);
  if (info == nullptr) {
    std::vector<std::string> names;
    for (const KindInfo& k : Kinds()) names.emplace_back(k.kind);
    return absl::InvalidArgumentError(absl::StrCat("--gen ", text, ": unknown generator '",
                                                   spec.kind, "' (want one of ",
                                                   absl::StrJoin(names, ", "), ")"));
  }
  for (absl::string_view kv : absl::StrSplit(rest, ',', absl::SkipWhitespace())) {
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gen ", text, ": '", kv, "' is not key=value"));
    }
    std::string key(absl::StripAsciiWhitespace(kv.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(kv.substr(eq + 1)));
    bool known = false;
    for (const auto& [k, d] : CommonKeys()) known |= (k == key);
    for (const auto& [k, d] : info->keys) known |= (k == key);
    if (!known) {
      std::vector<std::string> keys;
      for (const auto& [k, d] : info->keys) keys.emplace_back(k);
      for (const auto& [k, d] : CommonKeys()) keys.emplace_back(k);
      return absl::InvalidArgumentError(absl::StrCat("--gen ", text, ": unknown key '", key,
                                                     "' for ", spec.kind, " (known: ",
                                                     absl::StrJoin(keys, ", "), ")"));
    }
    if (!spec.params.emplace(key, value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gen ", text, ": key '", key, "' given twice"));
    }
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<RequestSource>> MakeGenerator(const GeneratorSpec& spec) {
  Params p(spec);
  Common c = ReadCommon(p, spec.kind == "multi");
  std::unique_ptr<RequestSource> gen;
  const std::string& kind = spec.kind;
  auto check_blocks = [&](uint64_t blocks) {
    if (blocks < c.size) p.Fail(absl::StrCat("blocks=", blocks, " is smaller than size=", c.size));
  };
  if (kind == "zipf") {
    uint64_t blocks = p.U64("blocks", 1, uint64_t{1} << 40);
    double theta = p.Double("theta", 0, 10);
    bool scatter = p.U64("scatter", 0, 1) == 1;
    check_blocks(blocks);
    if (p.status().ok()) gen = std::make_unique<ZipfGenerator>(c, blocks, theta, scatter);
  } else if (kind == "uniform") {
    uint64_t blocks = p.U64("blocks", 1, uint64_t{1} << 40);
    check_blocks(blocks);
    if (p.status().ok()) gen = std::make_unique<UniformGenerator>(c, blocks);
  } else if (kind == "scan" || kind == "seqwrite") {
    uint64_t blocks = p.U64("blocks", 1, uint64_t{1} << 40);
    uint64_t loops = p.U64("loops", 0, uint64_t{1} << 20);
    check_blocks(blocks);
    if (kind == "seqwrite" && spec.params.count("write") == 0) c.write = 1.0;
    if (loops > 0) c.requests = loops * (blocks / c.size);
    if (p.status().ok()) gen = std::make_unique<ScanGenerator>(c, blocks);
  } else if (kind == "hotspot") {
    HotspotGenerator::Shape s;
    s.blocks = p.U64("blocks", 1, uint64_t{1} << 40);
    s.areas = p.U64("areas", 1, 1 << 20);
    s.area = p.U64("area", 1, uint64_t{1} << 40);
    s.window = p.U64("window", 1, uint64_t{1} << 40);
    s.density = p.Double("density", 1e-6, 1);
    s.cycle = p.U64("cycle", 1, uint64_t{1} << 40);
    s.hot = p.Double("hot", 0, 1);
    s.step = p.U64("step", 0, uint64_t{1} << 40);
    if (s.step == 0) s.step = s.window;
    check_blocks(s.blocks);
    if (s.window > s.area) p.Fail("window must not exceed area");
    if (s.area < c.size) p.Fail("area must be at least size");
    if (s.areas * s.area > s.blocks) p.Fail("areas*area must fit in blocks");
    if (p.status().ok()) gen = std::make_unique<HotspotGenerator>(c, s);
  } else if (kind == "multi") {
    size_t vdis = p.U64("vdis", 1, 4096);
    std::vector<double> blocks_d = p.DoubleList("blocks", vdis, 1, 1e12);
    std::vector<double> thetas = p.DoubleList("theta", vdis, 0, 10);
    std::vector<double> writes = p.DoubleList("write", vdis, 0, 1);
    std::vector<double> weights;
    if (!p.Raw("rates").empty()) {
      weights = p.DoubleList("rates", vdis, 0, 1e12);
    } else {
      double skew = p.Double("skew", 0, 10);
      for (size_t i = 0; i < vdis; ++i) weights.push_back(std::pow(double(i + 1), -skew));
    }
    std::vector<uint64_t> blocks;
    for (double b : blocks_d) {
      blocks.push_back(static_cast<uint64_t>(b));
      check_blocks(blocks.back());
    }
    if (std::accumulate(weights.begin(), weights.end(), 0.0) <= 0) {
      p.Fail("rates must not all be 0");
    }
    if (p.status().ok()) {
      gen = std::make_unique<MultiVdiGenerator>(c, weights, blocks, thetas, writes);
    }
  }
  if (!p.status().ok()) return p.status();
  return gen;
}

absl::StatusOr<std::unique_ptr<RequestSource>> MakeGenerators(
    const std::vector<std::string>& specs) {
  if (specs.empty()) return absl::InvalidArgumentError("no generator spec");
  std::vector<std::unique_ptr<RequestSource>> sources;
  for (const std::string& text : specs) {
    absl::StatusOr<GeneratorSpec> spec = ParseGeneratorSpec(text);
    if (!spec.ok()) return spec.status();
    absl::StatusOr<std::unique_ptr<RequestSource>> gen = MakeGenerator(*spec);
    if (!gen.ok()) return gen.status();
    sources.push_back(*std::move(gen));
  }
  if (sources.size() == 1) return std::move(sources[0]);
  return std::unique_ptr<RequestSource>(new MergedSource(std::move(sources)));
}

std::string GeneratorHelp() {
  std::string out = "Generators (--gen KIND:key=value,...; lists use '/'):\n";
  for (const KindInfo& k : Kinds()) {
    absl::StrAppend(&out, "  ", k.kind, ": ", k.help, "\n      ");
    for (const auto& [key, d] : k.keys) absl::StrAppend(&out, key, "=", d, " ");
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "  common: ");
  for (const auto& [key, d] : CommonKeys()) absl::StrAppend(&out, key, "=", d, " ");
  absl::StrAppend(&out, "\n");
  return out;
}

MergedSource::MergedSource(std::vector<std::unique_ptr<RequestSource>> sources) {
  for (auto& s : sources) {
    Lane lane;
    lane.src = std::move(s);
    lane.buf.resize(1024);
    lanes_.push_back(std::move(lane));
  }
}

absl::StatusOr<size_t> MergedSource::Read(absl::Span<Request> out) {
  size_t n = 0;
  while (n < out.size()) {
    Lane* best = nullptr;
    for (Lane& lane : lanes_) {
      if (lane.pos == lane.len && !lane.done) {
        absl::StatusOr<size_t> got = lane.src->Read(absl::MakeSpan(lane.buf));
        if (!got.ok()) return got.status();
        lane.pos = 0;
        lane.len = *got;
        lane.done = *got == 0;
      }
      if (lane.pos < lane.len &&
          (best == nullptr || lane.buf[lane.pos].time_us < best->buf[best->pos].time_us)) {
        best = &lane;
      }
    }
    if (best == nullptr) break;
    out[n++] = best->buf[best->pos++];
  }
  stats_.requests += n;
  return n;
}

std::vector<std::string> MergedSource::VdiNames() const {
  std::vector<std::string> names;
  for (const Lane& lane : lanes_) {
    std::vector<std::string> sub = lane.src->VdiNames();
    if (sub.size() > names.size()) names.resize(sub.size());
    for (size_t i = 0; i < sub.size(); ++i) {
      if (names[i].empty()) names[i] = sub[i];
    }
  }
  return names;
}

}  // namespace ringcache::sim
