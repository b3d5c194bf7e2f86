#!/usr/bin/env bash
# anchor-vps.sh: docs/operators.md's "An anchor on a VPS", as commands, so
# the page is tested (e2e/operators_test.go) and an operator can run it.
#
#   sudo bash scripts/anchor-vps.sh fleetmesh-VERSION-linux-amd64.tar.gz wss://relay.example.org
#   sudo bash scripts/anchor-vps.sh ./fleetmesh wss://relay.example.org   # a bare binary: no iroh
#
# On a real machine it creates the `fleetmesh` system user, installs
# fleetmesh (scripts/install.sh: a release archive with its iroh helper
# into /opt/fleetmesh, Debian's nodejs where the platform has an iroh
# binding, /usr/local/bin/fleetmesh linked to it), makes the home
# /var/lib/fleetmesh, sets the
# page's config keys and starts deploy/fleetmesh.service. It is meant to
# be run once; a second run stops at useradd.
#
# With FLEETMESH_LAB=1 (the test), it must run in a private mount namespace
# (`unshare -m`): scripts/lab.sh puts /etc, /usr/local/bin and /var/lib on
# tmpfs copies, so the user, the binary and the home vanish with the
# namespace, and instead of systemd (which a network namespace does not
# have) it runs the unit's ExecStart as the unit's User in the foreground.
set -euo pipefail
bin=${1:?usage: anchor-vps.sh FLEETMESH_ARCHIVE_OR_BINARY [RELAY_URL]}
url=${2:-wss://relay.example.org}
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "$bin")

if [[ ${FLEETMESH_LAB:-} == 1 ]]; then
	# shellcheck source=scripts/lab.sh
	. "$here/scripts/lab.sh"
fi

# --- the page: user, binary and iroh, home -------------------------------
# shellcheck source=scripts/install.sh
. "$here/scripts/install.sh"
useradd --system --home-dir /var/lib/fleetmesh fleetmesh
install_fleetmesh "$bin"
FLEETMESH_HOME=/var/lib/fleetmesh fleetmesh init --class anchor
chown -R fleetmesh: /var/lib/fleetmesh

# --- the page: the keys it sets in config.toml --------------------------
cfg=/var/lib/fleetmesh/config.toml
sed -i \
	-e "s|^class = .*|class = 'anchor'|" \
	-e "/^\[relay\]/,/^\[/ s|^listen = .*|listen = '127.0.0.1:7447'|" \
	-e "/^\[relay\]/,/^\[/ s|^url = .*|url = '$url'|" \
	-e "/^\[mesh\]/,/^\[/ s|^listen = .*|listen = ['/ip4/0.0.0.0/tcp/4001', '/ip4/0.0.0.0/udp/4001/quic-v1', '/ip6/::/tcp/4001', '/ip6/::/udp/4001/quic-v1']|" \
	"$cfg"
for want in "class = 'anchor'" "listen = '127.0.0.1:7447'" "url = '$url'" "/ip4/0.0.0.0/tcp/4001"; do
	grep -qF "$want" "$cfg" || { echo "anchor-vps.sh: config.toml lacks $want after editing; the page's keys moved" >&2; exit 1; }
done

# --- the page: systemd ----------------------------------------------------
unit=$here/deploy/fleetmesh.service
if [[ ${FLEETMESH_LAB:-} == 1 ]]; then
	lab_exec_unit "$unit"
fi
cp "$unit" /etc/systemd/system/
systemctl daemon-reload
systemctl enable --now fleetmesh
echo "anchor-vps.sh: started; follow it with journalctl -u fleetmesh -f"
