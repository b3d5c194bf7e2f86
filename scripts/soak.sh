#!/usr/bin/env bash
# Issue 12's soak (e2e/soak_test.go): ten node processes and a gateway with
# a khatru backend, a publisher at every node and at the backend, nodes
# killed with SIGKILL and restarted, one with its data directory deleted,
# and the gateway killed and restarted once.
#
#   scripts/soak.sh            the short mode (about 3 minutes), as CI runs it
#   scripts/soak.sh --full     the full 30 minutes; record its figures in
#                              docs/benchmarks.md
#   scripts/soak.sh --seed N   the same victims as the run that logged seed N
#   scripts/soak.sh --profiles DIR
#                              nodes run with --pprof; heap and goroutine
#                              profiles of the nodes never killed are saved
#                              in DIR at a third of the run and at its end
#
# CI does not call this script: scripts/test.sh runs the short mode as a go
# test of its own, beside the rest of the suite. Everything runs at nice 19; the node processes, the
# backend and the gateway are built by the test itself.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=short
while [ $# -gt 0 ]; do
  case "$1" in
    --full) mode=full ;;
    --seed)
      [ $# -ge 2 ] || { echo "scripts/soak.sh: --seed needs a number" >&2; exit 2; }
      export FLEETMESH_SOAK_SEED="$2"
      shift ;;
    --profiles)
      [ $# -ge 2 ] || { echo "scripts/soak.sh: --profiles needs a directory" >&2; exit 2; }
      export FLEETMESH_SOAK_PROFILES="$(realpath -m "$2")"
      shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "scripts/soak.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$mode" = full ]; then
  export FLEETMESH_SOAK=full
  timeout=50m
else
  unset FLEETMESH_SOAK
  timeout=15m
fi
exec nice -n 19 go test -count=1 -v -timeout "$timeout" -run '^TestSoak$' ./e2e/
