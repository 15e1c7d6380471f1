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

}  // namespace ringcache
