#!/usr/bin/env bash
# pi-home.sh: docs/operators.md's "A home node on a Raspberry Pi", as
# commands, so the page is tested (e2e/operators_test.go) and an operator
# can run it on the Pi.
#
#   scripts/release.sh -t linux/arm64        # on any machine; linux/arm/7 for a 32-bit OS
#   sudo bash scripts/pi-home.sh dist/fleetmesh-VERSION-linux-arm64 [BOOTSTRAP]
#
# It creates the `fleetmesh` system user, installs the binary
# (scripts/install.sh: /opt/fleetmesh/fleetmesh, linked from
# /usr/local/bin/fleetmesh; a release archive with its iroh helper and
# Debian's nodejs on a platform with an iroh binding, which a Raspberry
# Pi is not: there it says so, and the node runs on libp2p), makes the home /var/lib/fleetmesh (class auto:
# home while behind NAT), sets the page's config keys (a smaller store
# cache, a store bound for an SD card, and BOOTSTRAP, a mesh line, when
# given), and starts deploy/fleetmesh.service with the memory limits of
# deploy/fleetmesh-pi.conf. Without BOOTSTRAP the node finds other home
# nodes on the LAN by mDNS; see "Joining the mesh" for the other ways in.
#
# With FLEETMESH_LAB=1 (the test) it runs as anchor-vps.sh does: in a
# private mount namespace, with the unit's command in the foreground
# (scripts/lab.sh).
set -euo pipefail
bin=${1:?usage: pi-home.sh FLEETMESH_BINARY_OR_ARCHIVE [BOOTSTRAP]}
bootstrap=${2:-}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "$bin")

if [[ ${FLEETMESH_LAB:-} == 1 ]]; then
	# shellcheck source=scripts/lab.sh
	. "$here/scripts/lab.sh"
fi

# --- the page: user, binary (and iroh where it runs), home ---------------
# shellcheck source=scripts/install.sh
. "$here/scripts/install.sh"
useradd --system --home-dir /var/lib/fleetmesh fleetmesh
install_fleetmesh "$bin"
FLEETMESH_HOME=/var/lib/fleetmesh fleetmesh init

# --- the page: the keys it sets in config.toml --------------------------
# A 32 MiB block cache (64 by default) and a store bound of 8 GiB, which
# withdraws the storage offer at 90 % of it (docs/operators.md).
cfg=/var/lib/fleetmesh/config.toml
sed -i \
	-e "/^\[store\]/,/^\[/ s|^cache_mb = .*|cache_mb = 32|" \
	-e "/^\[mesh\]/,/^\[/ s|^storage_max_bytes = .*|storage_max_bytes = 8589934592|" \
	"$cfg"
if [[ -n $bootstrap ]]; then
	sed -i -e "/^\[mesh\]/,/^\[/ s|^bootstrap = .*|bootstrap = ['$bootstrap']|" "$cfg"
fi
for want in "cache_mb = 32" "storage_max_bytes = 8589934592" ${bootstrap:+"bootstrap = ['$bootstrap']"}; do
	grep -qF "$want" "$cfg" || { echo "pi-home.sh: config.toml lacks $want after editing; the page's keys moved" >&2; exit 1; }
done
chown -R fleetmesh: /var/lib/fleetmesh

# --- the page: systemd, with the Pi's memory limits ----------------------
unit=$here/deploy/fleetmesh.service
dropin=$here/deploy/fleetmesh-pi.conf
if [[ ${FLEETMESH_LAB:-} == 1 ]]; then
	lab_exec_unit "$unit" "$dropin"
fi
cp "$unit" /etc/systemd/system/
mkdir -p /etc/systemd/system/fleetmesh.service.d
cp "$dropin" /etc/systemd/system/fleetmesh.service.d/memory.conf
systemctl daemon-reload
systemctl enable --now fleetmesh
echo "pi-home.sh: started; follow it with journalctl -u fleetmesh -f"
