#!/usr/bin/env bash
# upgrade.sh: docs/operators.md's "Upgrades", as commands: back the node
# up, stop it, replace the binary, start it.
#
#   sudo bash scripts/upgrade.sh ./fleetmesh-NEWVERSION-linux-amd64 [HOME]
#
# The backup is taken by the installed build, through the running node, so
# it holds the store in the format that build reads: to go back, restore it
# (scripts/restore.sh) and reinstall the old binary. The new build migrates
# the store, if its format changed, when it starts ("store: migrated" in
# the log). Backups go to $FLEETMESH_BACKUPS (/var/backups/fleetmesh); the
# binary is $FLEETMESH_BIN (/usr/local/bin/fleetmesh).
#
# With FLEETMESH_LAB=1 (the test, e2e/operators_test.go) there is no
# systemd: it stops the node with SIGTERM, as systemctl stop does, and
# leaves starting it to its caller.
set -euo pipefail
new=$(realpath "${1:?usage: upgrade.sh NEW_BINARY [HOME]}")
home=${2:-/var/lib/fleetmesh}
# The file the link points to (scripts/install.sh links
# /usr/local/bin/fleetmesh to /opt/fleetmesh/fleetmesh): replaced there, so
# the link and the iroh helper beside it stay as they are.
installed=$(realpath "${FLEETMESH_BIN:-/usr/local/bin/fleetmesh}")
backups=${FLEETMESH_BACKUPS:-/var/backups/fleetmesh}
lab=${FLEETMESH_LAB:-}

old_version=$("$installed" version)
new_version=$("$new" version)
backup=$backups/before-upgrade-$(date +%Y%m%dT%H%M%S)
"$installed" backup --home "$home" --out "$backup"

if [[ $lab == 1 ]]; then
	pid=$(cat "$home/node.lock" 2>/dev/null || true)
	if [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null; then
		for _ in $(seq 600); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "upgrade.sh: the node (pid $pid) did not stop within 60 s of SIGTERM" >&2
			exit 1
		fi
	fi
else
	systemctl stop fleetmesh
fi
# A new file, not one written over: the old binary may still be mapped.
install -m 0755 "$new" "$installed.new"
mv -f "$installed.new" "$installed"
[[ $lab == 1 ]] || systemctl start fleetmesh
echo "upgrade.sh: $old_version -> $new_version; to go back: scripts/restore.sh $backup $home, and the old binary"
