#!/usr/bin/env bash
# The compose image's default runtime packages (deploy/compose/Dockerfile, RUNTIME_PACKAGES)
# cover every shared library the daemons and ringcachectl of BUILD_DIR link: an image built by
# hand (docker build, without build-image.sh's computed list) starts too.
#
#   tests/deploy/image_packages_test.sh BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:?usage: image_packages_test.sh BUILD_DIR}
command -v dpkg > /dev/null || { echo "SKIP: no dpkg on this host"; exit 77; }
need=$(bash "$ROOT/deploy/compose/build-image.sh" --print-packages "$BUILD")
[ -n "$need" ] || { echo "FAIL: no package found for the binaries' libraries" >&2; exit 1; }
have=$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"$/\1/p' "$ROOT/deploy/compose/Dockerfile")
[ -n "$have" ] || { echo "FAIL: no RUNTIME_PACKAGES default in deploy/compose/Dockerfile" >&2; exit 1; }
missing=()
for p in $need; do
  case " $have " in *" $p "*) ;; *) missing+=("$p") ;; esac
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: deploy/compose/Dockerfile's RUNTIME_PACKAGES lacks ${missing[*]} (the binaries of $BUILD link their libraries)" >&2
  exit 1
fi
echo "image packages: the $(wc -w <<< "$need") packages the binaries need are all in the default list"
echo PASS
