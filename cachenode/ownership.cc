#include "cachenode/ownership.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/term_fence.h"

namespace ringcache::cachenode {

absl::StatusOr<std::unique_ptr<Ownership>> Ownership::Load(const std::string& ssd_path) {
  std::unique_ptr<Ownership> o(new Ownership(PathFor(ssd_path)));
  absl::StatusOr<std::string> read = ReadStateFile(o->path_);
  if (absl::IsNotFound(read.status())) return o;  // first start
  RC_RETURN_IF_ERROR(read.status());
  const std::string text = *std::move(read);
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(o->path_, ": ", why,
                                            "; refusing to guess whether this node still owns "
                                            "its objects (restore or remove the file)"));
  };
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != "RCOWNER1") return bad("not an ownership state file");
  absl::MutexLock l(&o->mu_);
  for (size_t i = 1; i < lines.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(lines[i], absl::MaxSplits(' ', 1));
    uint64_t n = 0;
    int64_t lease = 0;
    if (kv.first == "reason") {
      o->reason_ = kv.second;
    } else if (kv.first == "lease") {
      if (!absl::SimpleAtoi(kv.second, &lease)) {
        return bad(absl::StrCat("bad line '", lines[i], "'"));
      }
      o->lease_ = lease;  // -1: registering (the id was not known yet)
    } else if (!absl::SimpleAtoi(kv.second, &n)) {
      return bad(absl::StrCat("bad line '", lines[i], "'"));
    } else if (kv.first == "quarantined") {
      o->quarantined_.store(n != 0);
    } else if (kv.first == "epoch") {
      o->epoch_.store(n);
    } else if (kv.first == "term") {
      o->term_.store(n);
    } else {
      return bad(absl::StrCat("unknown key '", kv.first, "'"));
    }
  }
  return o;
}

absl::Status Ownership::SaveLocked() {
  return WriteFileAtomically(
      path_, absl::StrCat("RCOWNER1\nquarantined ", quarantined_.load() ? 1 : 0, "\nepoch ",
                          epoch_.load(), "\nlease ", lease_, "\nreason ", reason_, "\n",
                          term_.load() == 0 ? "" : absl::StrCat("term ", term_.load(), "\n")));
}

absl::Status Ownership::Check() const {
  if (!quarantined_.load()) return absl::OkStatus();
  return TypedError(ErrorKind::kFenced,
                    absl::StrCat("fenced: quarantined (", reason(),
                                 "); waiting for the gateway to re-admit this node"));
}

std::string Ownership::reason() const {
  absl::MutexLock l(&mu_);
  return reason_;
}

absl::Status Ownership::Quarantine(const std::string& reason) {
  absl::MutexLock l(&mu_);
  if (!quarantined_.load()) {
    spdlog::warn("quarantined: {}; serving and destaging nothing until the gateway re-admits "
                 "this node",
                 reason);
  }
  quarantined_.store(true);
  reason_ = reason;
  return SaveLocked();
}

absl::Status Ownership::Readmit(uint64_t epoch) {
  absl::MutexLock l(&mu_);
  if (quarantined_.load()) {
    spdlog::info("re-admitted by the gateway at ring epoch {}: serving again", epoch);
  }
  quarantined_.store(false);
  reason_.clear();
  if (epoch > epoch_.load()) epoch_.store(epoch);
  return SaveLocked();
}

absl::Status Ownership::ObserveEpoch(uint64_t epoch) {
  if (epoch <= epoch_.load()) return absl::OkStatus();
  absl::MutexLock l(&mu_);
  if (epoch <= epoch_.load()) return absl::OkStatus();
  epoch_.store(epoch);
  return SaveLocked();
}

absl::Status Ownership::ObserveTerm(uint64_t term) {
  return ringcache::ObserveTerm(term, "cache node", &mu_, &term_, [this](uint64_t t) {
    term_.store(t);  // SaveLocked writes term_ (mu_ is held here)
    return SaveLocked();
  });
}

absl::Status Ownership::NoteLease(int64_t lease) {
  absl::MutexLock l(&mu_);
  lease_ = lease;
  return SaveLocked();
}

int64_t Ownership::lease() const {
  absl::MutexLock l(&mu_);
  return lease_;
}

}  // namespace ringcache::cachenode
