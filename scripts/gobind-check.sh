#!/usr/bin/env bash
# Checks that package leaf binds with gomobile: gobind generates Java and
# Objective-C for it with nothing skipped (gobind writes "skipped ..." for
# every exported name whose types it cannot bind), and the package builds
# for android/arm64 and ios/arm64 without cgo (no NDK or Xcode here).
# gobind needs golang.org/x/mobile/bind importable, so it runs in a scratch
# module that requires this one by a replace, leaving go.mod as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mobile=golang.org/x/mobile@v0.0.0-20261011034528-197770444867
gobind=$(go env GOPATH)/bin/gobind
[ -x "$gobind" ] || go install "golang.org/x/mobile/cmd/gobind@${mobile#*@}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
go mod init gobindcheck >/dev/null 2>&1
go mod edit -require=fleetmesh.org/fleetmesh@v0.0.0 -replace=fleetmesh.org/fleetmesh="$root"
cat >tools.go <<'GO'
package gobindcheck

import (
	_ "fleetmesh.org/fleetmesh/leaf"
	_ "golang.org/x/mobile/bind"
)
GO
go get "$mobile" >/dev/null 2>&1
go mod tidy >/dev/null 2>&1
"$gobind" -lang=java,objc -outdir "$work/out" fleetmesh.org/fleetmesh/leaf
if grep -rn "skipped" "$work/out"; then
  echo "gobind skipped the names above: give them types gobind supports (spec/leaf.md)" >&2
  exit 1
fi
java=$(find "$work/out" -name '*.java' | wc -l)
objc=$(find "$work/out" -name '*.objc.h' | wc -l)
if [ "$java" -eq 0 ] || [ "$objc" -eq 0 ]; then
  echo "gobind wrote $java Java and $objc Objective-C headers" >&2
  exit 1
fi
cd "$root"
GOOS=android GOARCH=arm64 CGO_ENABLED=0 go build ./leaf
GOOS=ios GOARCH=arm64 CGO_ENABLED=0 go build ./leaf
echo "gobind: leaf binds to Java and Objective-C with nothing skipped; android/arm64 and ios/arm64 build"
