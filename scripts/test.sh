#!/usr/bin/env bash
# The whole fleetmesh test suite: installs what the tests need, then runs
# go vet and every Go test (unit, fuzz seeds, end-to-end and interop tests,
# which drive the npm packages in interop/ from Go) with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need: Node.js and npm (interop tests), iproute2
# and iptables (network-namespace tests), libsecp256k1-dev (the optional
# libsecp256k1 signature backend, tested against the pure-Go one).
missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
[ -e /usr/include/secp256k1_schnorrsig.h ] || missing+=(libsecp256k1-dev)
# nginx and systemd-analyze run the operator examples in deploy/
# (e2e/deploy_test.go).
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# Debian's chromium, driven by playwright-core from interop/, loads the
# operator dashboard (e2e/dashboard_test.go); no browser is downloaded.
[ -x /usr/bin/chromium ] || missing+=(chromium)
# PostgreSQL's server binaries: the PostgreSQL event store's tests start
# their own throwaway server on loopback (internal/pgtest).
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v wat2wasm >/dev/null 2>&1 || missing+=(wabt) # compute/sandbox builds its WAT fixtures
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    # Debian starts the nginx it installs; the tests run their own.
    if command -v service >/dev/null 2>&1; then service nginx stop >/dev/null 2>&1 || true; fi
  else
    echo "scripts/test.sh: missing ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

# The NAT test (e2e/nat_test.go) builds NAT routers with iptables in network
# namespaces. Debian's default iptables is the nft one; where this kernel
# refuses it but takes the legacy one, switch. Checked in a scratch
# namespace, so the machine's own tables are never touched.
if [ "$(id -u)" = 0 ] && command -v iptables-legacy >/dev/null 2>&1 && ip netns add "fm-iptables-$$" 2>/dev/null; then
  if ! ip netns exec "fm-iptables-$$" iptables -t nat -L >/dev/null 2>&1 &&
    ip netns exec "fm-iptables-$$" iptables-legacy -t nat -L >/dev/null 2>&1; then
    update-alternatives --set iptables "$(command -v iptables-legacy)"
  fi
  ip netns del "fm-iptables-$$"
fi

(cd interop && npm ci --no-audit --no-fund --loglevel=error)
# The browser leaf's npm packages (web/package-lock.json): its Node tests
# (web/*_test.go, e2e/webleaf_test.go) run its modules under Node.
(cd web && npm ci --no-audit --no-fund --loglevel=error)
# The iroh helper (@number0/iroh, from its own lock file): the iroh
# package's and the node's iroh tests run it.
# npm install, not npm ci: @number0/iroh 1.1.0 names optional platform
# packages the registry does not serve (android-arm-eabi and others), so
# no lock file can list them and npm 11's ci refuses the lock as out of
# sync. install still takes every version from the committed lock and
# --no-save leaves it as it is.
(cd iroh/helper && npm install --no-audit --no-fund --no-save --loglevel=error)

# The browser app (web/dist, embedded by package web) is rebuilt from the
# lock file (npm ci above); the committed build must be what the sources
# make.
(cd web && npm run build --silent)
[ -z "$(git status --porcelain web/dist)" ] || { git status --short web/dist; echo "web/dist differs from a fresh build: run (cd web && npm run build) and commit web/dist"; exit 1; }

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './interop/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== gobind (leaf binds for Android and iOS; installs gobind with go install)"
bash scripts/gobind-check.sh
echo "== go test -race"
# The soak's short mode (e2e.TestSoak, about 150 s of ten nodes publishing
# an event a second) is mostly waiting, and was a third of the e2e
# package's time: it runs beside the rest, its output printed after.
soaklog=$(mktemp)
go test -race -count=1 -timeout 15m -run '^TestSoak$' ./e2e/ >"$soaklog" 2>&1 &
soak=$!
rc=0
go test -race -count=1 -timeout 25m -skip '^TestSoak$' ./... || rc=$?
soakrc=0
wait "$soak" || soakrc=$?
echo "== e2e.TestSoak (short mode, run beside the above)"
cat "$soaklog"
rm -f "$soaklog"
if [ "$rc" != 0 ] || [ "$soakrc" != 0 ]; then exit 1; fi
echo "== go test -tags libsecp256k1 (the cgo signature backend)"
go test -race -count=1 -tags libsecp256k1 ./nostr ./relay
echo "== cross builds (windows/amd64, darwin/arm64: compile only)"
GOOS=windows GOARCH=amd64 go build -o /dev/null ./cmd/fleetmesh
GOOS=darwin GOARCH=arm64 go build -o /dev/null ./cmd/fleetmesh
echo "== release builds (linux/arm64, linux/armv7; reproducibility check)"
rel=$(mktemp -d)
bash scripts/release.sh -o "$rel" -t "linux/arm64 linux/arm/7"
rm -rf "$rel"
