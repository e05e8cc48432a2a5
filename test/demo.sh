#!/usr/bin/env bash
# demo.sh shows cutover on a 4-node cluster of containers (package test/cluster): it starts the
# cluster with the demo application at 1.0.0 on every node, queues a few jobs, shows each node,
# upgrades the cluster to 1.1.0 with cutover when this build has the upgrade command, and shows
# each node again. The cluster keeps running afterwards; `make demo-down` removes it.
#
# Environment: NAME (the cluster's name, default cutover-demo), CUTOVER_BIN (the cutover binary
# for the master, default bin/cutover from `make build`), GO (default go).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=${NAME:-cutover-demo}
GO=${GO:-go}
CUTOVER_BIN=${CUTOVER_BIN:-bin/cutover}
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

up=(up -nodes "${#NODES[@]}")
if [ -x "$CUTOVER_BIN" ]; then
	up+=(-cutover "$CUTOVER_BIN")
fi
say "starting the ${#NODES[@]}-node cluster $NAME with demoapp 1.0.0 (the node image is built once, then cached)"
ctl "${up[@]}"

say "submitting 3 jobs of 3 seconds on the master"
for _ in 1 2 3; do
	printf 'job %s\n' "$(ctl exec node1 "$D job submit --seconds 3")"
done

say "the cluster before"
show

if ctl exec node1 '/usr/sbin/cutover status --help' >/dev/null 2>&1; then
	say "cutover status"
	ctl exec node1 '/usr/sbin/cutover status' || true
fi

rc=0
if ctl exec node1 '/usr/sbin/cutover upgrade --help' >/dev/null 2>&1; then
	say "cutover upgrade --to=1.1.0 --yes (on node1, the master)"
	ctl exec node1 '/usr/sbin/cutover upgrade --to=1.1.0 --yes' || rc=$?
	[ "$rc" -eq 0 ] || echo "cutover upgrade exited $rc"
else
	say "upgrade skipped: this cutover build has no 'upgrade' command"
fi

say "the cluster after"
show

say "the cluster $NAME keeps running"
echo "  make node-exec NODE=node1 CMD='/usr/sbin/cutover status'   run a command on a node"
echo "  make node-crash NODE=node3 (node-reboot, node-poweroff, node-poweron, node-cut, node-heal)"
echo "  make demo-down                                               remove it"
exit "$rc"
