#!/usr/bin/env bash
# Release builds of fleetmesh: cross-builds the binary for the platforms
# operators run it on, stamps the version and commit, makes a release
# archive with the iroh helper for each platform that has an iroh binding
# (scripts/release-archive.sh: linux/amd64 and darwin/arm64), writes
# SHA-256 checksums, and checks that the build is reproducible (two builds
# from the same commit give the same bytes).
#
#   scripts/release.sh [-o DIR] [-v VERSION] [-t TARGETS] [--no-repro]
#
#   -o DIR      where the binaries, archives and SHA256SUMS go (default dist/)
#   -v VERSION  the version stamped into the binary (default: git describe)
#   -t TARGETS  space-separated GOOS/GOARCH[/GOARM] list (default: all five)
#   --no-repro  skip the second build and the byte comparison
#   --fresh-cache  the second build compiles everything again, in an empty
#               build cache (slower; the default reuses the cache)
#
# The builds are pure Go (CGO_ENABLED=0, so the pure-Go signature check),
# -trimpath, no build id and no VCS stamp beyond the commit given here, so
# that the output depends only on the source, the Go version and the target.
# An archive is fleetmesh-VERSION-OS-ARCH.tar.gz: the binary as
# `fleetmesh` and iroh/helper beside it, installed from the helper's lock
# (npm reaches the registry or its cache); its files carry the commit's
# time.
set -euo pipefail
cd "$(dirname "$0")/.."

out=dist
ver=""
targets="linux/amd64 linux/arm64 linux/arm/7 darwin/arm64 windows/amd64"
repro=1
fresh=0
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift 2 ;;
    -v) ver=$2; shift 2 ;;
    -t) targets=$2; shift 2 ;;
    --no-repro) repro=0; shift ;;
    --fresh-cache) fresh=1; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain 2>/dev/null)" ] || commit="$commit-dirty"
if [ -z "$ver" ]; then
  ver=$(git describe --tags --always --dirty 2>/dev/null || echo devel)
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH

# build TARGET DIR: one binary for TARGET into DIR; prints its path.
build() {
  local target=$1 dir=$2 goos goarch goarm name
  IFS=/ read -r goos goarch goarm <<<"$target"
  name="fleetmesh-$ver-$goos-$goarch${goarm:+v$goarm}"
  [ "$goos" = windows ] && name="$name.exe"
  GOOS=$goos GOARCH=$goarch GOARM=${goarm:-} CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go build -trimpath \
    -ldflags "-s -w -buildid= -X main.version=$ver -X main.commit=$commit" \
    -o "$dir/$name" ./cmd/fleetmesh
  echo "$dir/$name"
}

# archive TARGET BINARY DIR: the release archive of TARGET into DIR, if
# TARGET has an iroh binding; prints its path.
archive() {
  local target=$1 bin=$2 dir=$3
  bash scripts/iroh-helper.sh --bound "$target" || return 0
  bash scripts/release-archive.sh "$bin" "$target" "$dir/$(basename "${bin%.exe}").tar.gz"
}

built=()
for t in $targets; do
  echo "== build $t" >&2
  bin=$(build "$t" "$out")
  built+=("$bin")
  a=$(archive "$t" "$bin" "$out")
  [ -z "$a" ] || { echo "== archive $t with the iroh helper" >&2; built+=("$a"); }
done

(cd "$out" && sha256sum "${built[@]##*/}" >SHA256SUMS)
echo "== checksums ($out/SHA256SUMS)" >&2
cat "$out/SHA256SUMS"

if [ "$repro" = 1 ]; then
  # A second build from a copy of the source at another path must give the
  # same bytes: what would make two builds differ (the checkout's path, a
  # build id, a VCS stamp, the time) must not reach the binary. With
  # --fresh-cache it also compiles everything again in an empty build cache.
  src2=$(mktemp -d)
  second=$(mktemp -d)
  cache=$(mktemp -d)
  trap 'rm -rf "$src2" "$second" "$cache"' EXIT
  tar --exclude=./interop/node_modules --exclude=./iroh/helper/node_modules --exclude=./dist --exclude=./.git -cf - . | tar -xf - -C "$src2"
  for t in $targets; do
    echo "== rebuild $t from $src2 (reproducibility)" >&2
    if [ "$fresh" = 1 ]; then
      bin=$(cd "$src2" && GOCACHE=$cache build "$t" "$second")
    else
      bin=$(cd "$src2" && build "$t" "$second")
    fi
    (cd "$src2" && archive "$t" "$bin" "$second" >/dev/null)
  done
  if (cd "$second" && sha256sum -c --quiet "$out/SHA256SUMS"); then
    echo "reproducible: the second build gave the same bytes for every target"
  else
    echo "release.sh: NOT reproducible: the second build differs (see above)" >&2
    exit 1
  fi
fi
