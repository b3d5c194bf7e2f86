#!/usr/bin/env bash
# release-archive.sh: a release archive of fleetmesh for a platform with
# an iroh binding: the binary and, beside it, the iroh helper with its
# modules installed from the lock (scripts/iroh-helper.sh), so that a node
# started from the unpacked archive runs iroh with no further step (it
# needs Node.js 20.3 or later on PATH). scripts/release.sh makes one per
# such target; e2e/iroh_test.go unpacks one and runs the node from it.
#
#   scripts/release-archive.sh BINARY GOOS/GOARCH OUT.tar.gz
#
# The archive holds one directory named as OUT without .tar.gz:
#
#   NAME/fleetmesh             the binary (fleetmesh.exe on windows)
#   NAME/iroh/helper/          helper.mjs, package.json, package-lock.json, node_modules/
#
# It is reproducible: names sorted, owner 0, modes normalised, every
# mtime $SOURCE_DATE_EPOCH (else the commit's, or 0 outside git), gzip
# without a name or time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: release-archive.sh BINARY GOOS/GOARCH OUT.tar.gz}
target=${2:?usage: release-archive.sh BINARY GOOS/GOARCH OUT.tar.gz}
out=${3:?usage: release-archive.sh BINARY GOOS/GOARCH OUT.tar.gz}
[[ $out == *.tar.gz ]] || { echo "release-archive.sh: $out does not end in .tar.gz" >&2; exit 2; }
name=$(basename "$out" .tar.gz)
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
exe=fleetmesh
[[ $target == windows/* ]] && exe=fleetmesh.exe
mkdir -p "$stage/$name"
install -m 0755 "$bin" "$stage/$name/$exe"
bash "$here/scripts/iroh-helper.sh" "$stage/$name/iroh/helper" "$target" >/dev/null

mtime=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || echo 0)}
tar -C "$stage" --sort=name --mtime="@$mtime" --owner=0 --group=0 --numeric-owner \
	--mode='u+rw,go+r,go-w' --format=gnu -cf - "$name" | gzip -n -9 >"$out"
echo "$out"
