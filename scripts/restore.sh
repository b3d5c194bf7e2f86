#!/usr/bin/env bash
# restore.sh: docs/operators.md's "Backups and restore", as commands: put a
# backup that `fleetmesh backup` made in place of a node home, keeping the
# old home beside it.
#
#   sudo bash scripts/restore.sh /var/backups/fleetmesh/20261204T0300 [/var/lib/fleetmesh]
#
# It stops the node (systemctl stop fleetmesh), moves the home aside to
# HOME.before-restore-TIME, copies the backup in its place (owned by the
# `fleetmesh` user when there is one) and starts the node again. With
# FLEETMESH_LAB=1 (the test, e2e/backup_test.go) it leaves stopping and
# starting the node to its caller.
set -euo pipefail
backup=${1:?usage: restore.sh BACKUP_DIR [HOME]}
home=${2:-/var/lib/fleetmesh}
manifest=$backup/fleetmesh-backup.json
if [[ ! -f $manifest ]]; then
	echo "restore.sh: $backup has no fleetmesh-backup.json: it is not a complete backup made by fleetmesh backup" >&2
	exit 1
fi
lab=${FLEETMESH_LAB:-}

[[ $lab == 1 ]] || systemctl stop fleetmesh
if [[ -e $home ]]; then
	aside=$home.before-restore-$(date +%Y%m%dT%H%M%S)
	mv "$home" "$aside"
	echo "restore.sh: the old home is at $aside"
fi
cp -a "$backup" "$home"
if id fleetmesh >/dev/null 2>&1; then
	chown -R fleetmesh: "$home"
fi
[[ $lab == 1 ]] || systemctl start fleetmesh
did=$(sed -n 's/.*"did": "\([^"]*\)".*/\1/p' "$manifest")
taken=$(sed -n 's/.*"taken": "\([^"]*\)".*/\1/p' "$manifest")
echo "restore.sh: $home is now the backup of $did taken $taken"
