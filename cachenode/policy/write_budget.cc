// See write_budget.h.
#include "cachenode/policy/write_budget.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringcache::policy {
namespace {

constexpr double kRateSeconds = 3600;  // the write rate's averaging time constant

}  // namespace

absl::Status WriteBudgetConfig::Validate() const {
  if (!(blocks_per_second > 0) || !std::isfinite(blocks_per_second)) {
    return absl::InvalidArgumentError(
        absl::StrCat("write budget: blocks_per_second must be > 0, not ", blocks_per_second));
  }
  if (!(burst_seconds > 0) || !std::isfinite(burst_seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("write budget: burst_seconds must be > 0, not ", burst_seconds));
  }
  if (!(tight_below > 0) || tight_below > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("write budget: tight_below must be in (0, 1], not ", tight_below));
  }
  if (doorkeeper < 1) return absl::InvalidArgumentError("write budget: doorkeeper must be >= 1");
  return absl::OkStatus();
}

WriteBudgetConfig WriteBudgetConfig::ForRating(double bytes_per_day, uint32_t block_size,
                                               double burst_seconds, size_t capacity_blocks) {
  WriteBudgetConfig c;
  c.blocks_per_second = BudgetBlocksPerSecond(bytes_per_day, block_size);
  c.burst_seconds = burst_seconds;
  c.doorkeeper = std::max<size_t>(16, capacity_blocks / 4);
  return c;
}

std::string_view BudgetStateName(BudgetState s) {
  switch (s) {
    case BudgetState::kOpen:
      return "open";
    case BudgetState::kTight:
      return "tight";
    case BudgetState::kClosed:
      return "closed";
  }
  return "unknown";
}

WriteBudget::WriteBudget(const WriteBudgetConfig& config)
    : config_(config),
      depth_(std::max(1.0, config.blocks_per_second * config.burst_seconds)),
      tokens_(depth_) {}

void WriteBudget::Refill(uint64_t now_us) {
  if (!started_) {
    started_ = true;
    last_us_ = rate_us_ = now_us;
    return;
  }
  if (now_us <= last_us_) return;
  tokens_ = std::min(depth_, tokens_ + (now_us - last_us_) * 1e-6 * config_.blocks_per_second);
  last_us_ = now_us;
  // The rate: what was written since rate_us_, folded in once a second of the clock has passed
  // (an exponential average over kRateSeconds, weighted by the time each sample covers).
  const double dt = (now_us - rate_us_) * 1e-6;
  if (dt >= 1) {
    const double w = 1 - std::exp(-dt / kRateSeconds);
    rate_ += w * (rate_pending_ / dt - rate_);
    rate_pending_ = 0;
    rate_us_ = now_us;
  }
}

BudgetState WriteBudget::State() const {
  if (tokens_ <= 0) return BudgetState::kClosed;
  if (tokens_ < config_.tight_below * depth_) return BudgetState::kTight;
  return BudgetState::kOpen;
}

void WriteBudget::Spend(uint64_t blocks, uint64_t now_us) {
  Refill(now_us);
  tokens_ = std::max(-depth_, tokens_ - static_cast<double>(blocks));
  written_ += blocks;
  rate_pending_ += blocks;
}

bool WriteBudget::GoAround(const Access& access) {
  Refill(access.now_us);
  const BudgetState state = State();
  if (state == BudgetState::kOpen) return false;
  const bool write = access.op == Op::kWrite;
  if (state == BudgetState::kTight && door_.erase(access.key) > 0) {
    // Missed again while remembered: let in. (Its entry in door_order_ stays until it reaches
    // the front, where a key no longer in door_ is skipped.)
    ++let_in_;
    return false;
  }
  if (door_.insert(access.key).second) {
    door_order_.push_back(access.key);
    while (door_.size() > config_.doorkeeper || door_order_.size() > 2 * config_.doorkeeper) {
      door_.erase(door_order_.front());
      door_order_.pop_front();
    }
  }
  ++(write ? around_writes_ : around_reads_);
  return true;
}

WriteBudget::Snapshot WriteBudget::snapshot() const {
  Snapshot s;
  s.state = State();
  s.fill = tokens_ / depth_;
  s.written_blocks = written_;
  s.around_reads = around_reads_;
  s.around_writes = around_writes_;
  s.let_in = let_in_;
  s.rate_blocks_per_s = rate_;
  return s;
}

absl::StatusOr<double> BudgetBytesPerDay(
    std::string_view text_in, uint64_t drive_bytes,
    const std::function<absl::StatusOr<uint64_t>(std::string_view)>& parse_size) {
  const absl::string_view text = absl::StripAsciiWhitespace(
      absl::string_view(text_in.data(), text_in.size()));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("SSD write budget '", text, "': ", why,
                     " (give drive writes per day, e.g. 1dwpd, or a size per day, e.g. "
                     "200GiB/day)"));
  };
  double v = 0;
  if (absl::EndsWithIgnoreCase(text, "dwpd")) {
    const absl::string_view num =
        absl::StripAsciiWhitespace(text.substr(0, text.size() - 4));
    if (!absl::SimpleAtod(num, &v) || !(v > 0) || !std::isfinite(v)) {
      return bad("not a positive number of drive writes");
    }
    if (drive_bytes == 0) return bad("the drive's size is not known");
    return v * static_cast<double>(drive_bytes);
  }
  for (absl::string_view suffix : {"/day", "/d"}) {
    if (!absl::EndsWithIgnoreCase(text, suffix)) continue;
    const absl::string_view size =
        absl::StripAsciiWhitespace(text.substr(0, text.size() - suffix.size()));
    absl::StatusOr<uint64_t> bytes = parse_size(std::string_view(size.data(), size.size()));
    if (!bytes.ok() || *bytes == 0) return bad("not a positive size per day");
    return static_cast<double>(*bytes);
  }
  return bad("unknown unit");
}

size_t BudgetBypass::MetadataBytes() const {
  return budget_->config().doorkeeper * (sizeof(BlockKey) * 3);
}

}  // namespace ringcache::policy
