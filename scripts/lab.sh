# lab.sh: sourced by the operator page scripts (anchor-vps.sh, pi-home.sh)
# when FLEETMESH_LAB=1, which is how the tests (e2e/operators_test.go) run
# them. It needs a private mount namespace (`unshare -m`): it puts /etc,
# /usr/local/bin, /opt and /var/lib on tmpfs copies, so the user, the binary and
# the home a page makes vanish with the namespace. lab_exec_unit then runs
# a systemd unit's ExecStart as its User, with its Environment and that of
# its drop-ins, in the foreground (a network namespace has no systemd).

if [[ $(readlink /proc/self/ns/mnt) == $(readlink /proc/1/ns/mnt) ]]; then
	echo "$(basename "$0"): FLEETMESH_LAB=1 needs a private mount namespace (run it under unshare -m)" >&2
	exit 2
fi
mount --make-rprivate /
mount -t tmpfs tmpfs /mnt
cp -a /etc /mnt/etc
mount --bind /mnt/etc /etc
mount -t tmpfs tmpfs /usr/local/bin
mount -t tmpfs tmpfs /opt
mount -t tmpfs tmpfs /var/lib

# lab_exec_unit UNIT [DROPIN...]: exec the unit's ExecStart as its User,
# with the Environment= lines of the unit and then of each drop-in.
lab_exec_unit() {
	local unit=$1
	shift
	local user start
	user=$(sed -n 's/^User=//p' "$unit")
	start=$(sed -n 's/^ExecStart=//p' "$unit")
	local env=()
	local f line
	for f in "$unit" "$@"; do
		while IFS= read -r line; do
			env+=("$line")
		done < <(sed -n 's/^Environment=//p' "$f")
	done
	# shellcheck disable=SC2086 # ExecStart is a command line
	exec setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs \
		env -i PATH=/usr/local/bin:/usr/bin:/bin "${env[@]}" $start
}
