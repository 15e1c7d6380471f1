#include "common/formats.h"

#include "absl/strings/str_cat.h"

namespace ringcache {
absl::Status CheckFormat(const Format& format, uint32_t found, absl::string_view where) {
  if (found >= format.reads_from && found <= format.writes) return absl::OkStatus();
  const bool newer = found > format.writes;
  return absl::FailedPreconditionError(absl::StrCat(
      where, ": ", format.what, " format version ", found, "; this release reads ", format.name,
      " versions ", ReadableVersions(format), ". ",
      newer ? "It was written by a newer release: run that release (or a newer one) here"
            : "It was written by a release too old to read: upgrade it through the releases "
              "between (docs/upgrades.md)"));
}

absl::Status CheckPeerApi(uint32_t said, absl::string_view peer) {
  const uint32_t v = said == 0 ? 1 : said;
  const Format& f = kNodeApiFormat;
  if (v >= f.reads_from && v <= f.writes) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      peer, " speaks ", f.name, " version ", v, "; this release speaks versions ",
      ReadableVersions(f), ". Upgrade the ", v > f.writes ? "side that runs this release" : "peer",
      " (each release speaks its own version and the one before; docs/upgrades.md)"));
}

}  // namespace ringcache
