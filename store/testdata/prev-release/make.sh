#!/usr/bin/env bash
# make.sh: rebuilds store/testdata/prev-release (see README.md there) from
# the last commit before the store recorded its format: that commit's
# fleetmesh is built from `git archive` in a temporary directory, run on a
# fresh home, and fed events by gen/ (this module's code, over the relay's
# WebSocket); its store, after a clean stop, is the fixture.
#
#   bash store/testdata/prev-release/make.sh [COMMIT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
rev=$(git -C "$repo" rev-parse "${1:-0af7af2^}")
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
pid=

mkdir "$work/src"
git -C "$repo" archive "$rev" | tar -x -C "$work/src"
(cd "$work/src" && CGO_ENABLED=0 go build -o "$work/fleetmesh" ./cmd/fleetmesh)
(cd "$repo" && go build -o "$work/gen" ./store/testdata/prev-release/gen)

"$work/fleetmesh" init --home "$work/home" >/dev/null
# A lone node: no mesh address, no mDNS, no DHT, no iroh, no rate limits.
cat >"$work/home/config.toml" <<'TOML'
[relay]
events_per_second = 0
ip_events_per_second = 0
[mesh]
listen = []
mdns = false
dht = 'off'
[iroh]
enabled = false
TOML
"$work/fleetmesh" run --home "$work/home" --listen 127.0.0.1:0 >"$work/run.out" 2>"$work/run.err" &
pid=$!
for _ in $(seq 300); do
	url=$(sed -n 's/^relay //p' "$work/run.out")
	[[ -n $url ]] && break
	sleep 0.1
done
[[ -n $url ]] || { cat "$work/run.err" >&2; echo "make.sh: the old node did not start" >&2; exit 1; }

"$work/gen" -url "$url" -out "$work/events.jsonl"
kill -TERM "$pid"
wait "$pid" || true
pid=

rm -rf "$here/store" "$here/events.jsonl"
cp -a "$work/home/data" "$here/store"
cp "$work/events.jsonl" "$here/events.jsonl"
echo "$rev" >"$here/COMMIT"
echo "make.sh: wrote $here/store and events.jsonl ($(wc -l <"$here/events.jsonl") events) from $rev"
