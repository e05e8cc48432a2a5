#!/usr/bin/env bash
# demo.sh shows cutover on a 4-node cluster of containers (package test/cluster): it starts the
# cluster with the demo application's 1.0.0 (live) and 1.1.0 on every node, puts the 1.2.0
# release tarball on the master and stages it onto every node with `cutover stage`, queues a few
# jobs, shows each node, upgrades the cluster to 1.2.0 with cutover, shows each node again and
# what `cutover prune` would remove. The cluster keeps running afterwards; `make demo-down`
# removes it.
#
# cutover reaches the master as operators install it: its Debian package, with dpkg -i.
#
# Environment: NAME (the cluster's name, default cutover-demo), CUTOVER_DEB (cutover's package
# for the master, default bin/cutover.deb from `make deb`), GO (default go).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=${NAME:-cutover-demo}
GO=${GO:-go}
CUTOVER_DEB=${CUTOVER_DEB:-bin/cutover.deb}
D=/usr/lib/demoapp/default/usr/sbin/demoapp
NODES=(node1 node2 node3 node4)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/clusterctl" ./test/cluster/clusterctl
ctl() { "$tmp/clusterctl" -name "$NAME" "$@"; }
say() { printf '\n== %s\n' "$*"; }

# show prints, per node, where the switch links point, the installed versions and the daemon.
show() {
	for node in "${NODES[@]}"; do
		ctl exec "$node" '
			installed=""
			for dir in /usr/lib/demoapp/*/; do
				v=$(basename "$dir")
				[ "$v" != default ] && [ -d "/usr/share/demoapp/$v" ] && installed="$installed $v"
			done
			printf "%-6s lib -> %s, share -> %s; installed:%s; daemon: %s\n" "$(hostname)" \
				"$(readlink /etc/demoapp/lib)" "$(readlink /etc/demoapp/share)" "$installed" \
				"$('"$D"' daemon status 2>&1)"' || true
	done
	echo "jobs on node1:"
	ctl exec node1 "$D job list | sed 's/^/  /'" || true
}

[ -f "$CUTOVER_DEB" ] || { echo "demo.sh: $CUTOVER_DEB is missing: run 'make deb'" >&2; exit 1; }
say "starting the ${#NODES[@]}-node cluster $NAME with demoapp 1.0.0 live and 1.1.0 installed (the node image is built once, then cached)"
ctl up -nodes "${#NODES[@]}" -package "$CUTOVER_DEB" -missing 1.2.0

say "cutover's package on node1, the master, and its resume at boot"
ctl exec node1 'dpkg-query -W cutover; cat /etc/cron.d/cutover'

say "the demoapp 1.2.0 release tarball, on the master"
ctl release node1 1.2.0 /root/demoapp-1.2.0.tar.gz
ctl exec node1 'tar -tzf /root/demoapp-1.2.0.tar.gz | sed "s/^/  /"'

rc=0
say "cutover stage --version=1.2.0 /root/demoapp-1.2.0.tar.gz (on node1, the master)"
ctl exec node1 '/usr/sbin/cutover stage --version=1.2.0 /root/demoapp-1.2.0.tar.gz' || rc=$?
[ "$rc" -eq 0 ] || { echo "cutover stage exited $rc"; exit "$rc"; }

say "submitting 3 jobs of 3 seconds on the master"
for _ in 1 2 3; do
	printf 'job %s\n' "$(ctl exec node1 "$D job submit --seconds 3")"
done

say "the cluster before"
show

say "cutover status"
ctl exec node1 '/usr/sbin/cutover status' || true

say "cutover upgrade --to=1.2.0 --yes (on node1, the master)"
ctl exec node1 '/usr/sbin/cutover upgrade --to=1.2.0 --yes' || rc=$?
[ "$rc" -eq 0 ] || echo "cutover upgrade exited $rc"

say "the cluster after"
show

say "cutover prune --dry-run (1.1.0 stays: it is the version a downgrade goes back to)"
ctl exec node1 '/usr/sbin/cutover prune --keep=0 --dry-run' || true

say "the cluster $NAME keeps running"
echo "  make node-exec NODE=node1 CMD='/usr/sbin/cutover status'   run a command on a node"
echo "  make node-crash NODE=node3 (node-reboot, node-poweroff, node-poweron, node-cut, node-heal)"
echo "  make demo-down                                               remove it"
exit "$rc"
