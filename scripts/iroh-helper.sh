#!/usr/bin/env bash
# iroh-helper.sh: install the iroh helper (iroh/helper: helper.mjs and
# @number0/iroh from the committed lock) into DEST for a target platform,
# as the node looks for it beside its executable (`iroh/helper`). The
# release archives (scripts/release-archive.sh) and the container image
# (Dockerfile) are made with it, and e2e/iroh_test.go runs a node from
# what it lays out.
#
#   scripts/iroh-helper.sh DEST GOOS/GOARCH   install into DEST (made; must not exist)
#   scripts/iroh-helper.sh --bound GOOS/GOARCH
#                                             exit 0 if the platform has a binding
#
# @number0/iroh 1.1.0's native binding is served for linux/amd64 (glibc)
# and darwin/arm64 only; for any other platform this says so and exits 3.
# The binding of the target is installed whatever platform runs this (npm's
# --os, --cpu and --libc), so one machine makes every archive.
#
# npm install --no-save, not npm ci: @number0/iroh names optional platform
# packages the registry does not serve, so no lock can list them and npm
# 11's ci refuses the lock as out of sync; install takes every version it
# installs from the lock (their integrity hashes included) and --no-save
# leaves the lock as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

# npm_platform GOOS/GOARCH: npm's --os/--cpu/--libc flags, and the binding
# package, for a platform with a binding; fails for one without.
npm_platform() {
	case "$1" in
	linux/amd64) echo "--os=linux --cpu=x64 --libc=glibc @number0/iroh-linux-x64-gnu/iroh.linux-x64-gnu.node" ;;
	darwin/arm64) echo "--os=darwin --cpu=arm64 @number0/iroh-darwin-arm64/iroh.darwin-arm64.node" ;;
	*) return 1 ;;
	esac
}

if [[ ${1:-} == --bound ]]; then
	npm_platform "${2:?usage: iroh-helper.sh --bound GOOS/GOARCH}" >/dev/null
	exit
fi
dest=${1:?usage: iroh-helper.sh DEST GOOS/GOARCH}
target=${2:?usage: iroh-helper.sh DEST GOOS/GOARCH}
if ! spec=$(npm_platform "$target"); then
	echo "iroh-helper.sh: @number0/iroh has no native binding for $target (the npm registry serves linux/amd64 and darwin/arm64 only): a node there runs on libp2p, and reaches iroh nodes through an anchor that speaks both (spec/iroh.md, \"Platforms without a binding\")" >&2
	exit 3
fi
read -r -a flags <<<"$spec"
binding=${flags[-1]}
unset 'flags[-1]'
if [[ -e $dest ]]; then
	echo "iroh-helper.sh: $dest exists; give a new directory" >&2
	exit 2
fi

mkdir -p "$dest"
cp "$here/iroh/helper/helper.mjs" "$here/iroh/helper/package.json" "$here/iroh/helper/package-lock.json" "$dest/"
(cd "$dest" && npm install --no-save --omit=dev --no-audit --no-fund --loglevel=error "${flags[@]}" >&2)
if [[ ! -f $dest/node_modules/$binding ]]; then
	echo "iroh-helper.sh: npm installed no $binding into $dest" >&2
	exit 1
fi
# On its own platform the binding is also loaded, as the node's check does.
arch=$(uname -m)
case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; esac
host="$(uname -s | tr '[:upper:]' '[:lower:]')/$arch"
if [[ $host == "$target" ]] && command -v node >/dev/null; then
	(cd "$dest" && node helper.mjs --check >&2)
fi
echo "$dest"
