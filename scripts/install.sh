# install.sh: sourced by the operator page scripts (anchor-vps.sh,
# pi-home.sh). install_fleetmesh puts fleetmesh, and iroh where the
# platform can run it, on the machine:
#
#   install_fleetmesh SRC
#
# SRC is a release archive (fleetmesh-VERSION-OS-ARCH.tar.gz, made by
# scripts/release.sh for platforms with an iroh binding) or a bare binary.
# An archive is unpacked into /opt/fleetmesh, with the iroh helper at
# /opt/fleetmesh/iroh/helper beside the executable, where the node looks
# for it; a binary is installed as /opt/fleetmesh/fleetmesh. Either way
# /usr/local/bin/fleetmesh links to it (the node finds its helper through
# the link: the kernel names the executable by its real path).
#
# Where the platform has a binding of @number0/iroh (amd64 among Linux
# platforms), it installs Debian's nodejs when no Node.js of 20.3 or later
# is there, and says plainly when the one Debian has is older (Debian 12's
# 18.20: then iroh stays off until a newer Node.js is installed). Where
# the platform has none (arm64, armhf), it says so: the node runs on
# libp2p, and reaches iroh nodes through anchors that speak both
# (spec/iroh.md, "Platforms without a binding"). With FLEETMESH_LAB=1 it
# installs no package and only says what it would.

# node_ok: whether `node` is Node.js 20.3 or later.
node_ok() {
	command -v node >/dev/null 2>&1 &&
		node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 3) ? 0 : 1)'
}

install_fleetmesh() {
	local src=$1 arch iroh=0
	arch=$(dpkg --print-architecture 2>/dev/null || uname -m)
	rm -rf /opt/fleetmesh
	mkdir -p /opt/fleetmesh
	if [[ $src == *.tar.gz ]]; then
		tar -xzf "$src" -C /opt/fleetmesh --strip-components=1 --no-same-owner
		[[ -f /opt/fleetmesh/iroh/helper/helper.mjs ]] && iroh=1
	else
		install -m 0755 "$src" /opt/fleetmesh/fleetmesh
	fi
	ln -sf /opt/fleetmesh/fleetmesh /usr/local/bin/fleetmesh

	case $arch in
	amd64 | x86_64) ;;
	*)
		echo "$(basename "$0"): iroh: @number0/iroh has no native binding for $arch (only linux amd64 and macOS arm64): this node runs on libp2p, and reaches iroh nodes through anchors that speak both (spec/iroh.md)" >&2
		return 0
		;;
	esac
	if [[ $iroh == 0 ]]; then
		echo "$(basename "$0"): iroh: $src is a bare binary; for iroh give the release archive (fleetmesh-VERSION-linux-amd64.tar.gz, scripts/release.sh), which carries the helper. The node runs on libp2p alone." >&2
		return 0
	fi
	if ! node_ok; then
		if [[ ${FLEETMESH_LAB:-} == 1 ]]; then
			echo "$(basename "$0"): lab: would apt-get install nodejs" >&2
		else
			apt-get update -q && apt-get install -y --no-install-recommends nodejs
		fi
	fi
	if node_ok; then
		echo "$(basename "$0"): iroh: Node.js $(node --version) runs the helper in /opt/fleetmesh/iroh/helper" >&2
	else
		echo "$(basename "$0"): iroh: this Debian's nodejs is $(node --version 2>/dev/null || echo missing); @number0/iroh needs Node.js 20.3 or later (Debian 13 has 20.19). iroh stays off, and the node runs on libp2p alone, until a newer Node.js is on PATH." >&2
	fi
}
