#!/usr/bin/env bash
# demo-rolling.sh shows cutover's rolling strategy on a 4-node cluster of containers: the demo
# application at 1.1.0 on every node, a client on the master sending requests to every node
# that is not drained, and cutover switching the cluster to 1.2.0 batch by batch (node2 alone
# as the canary, then node3 and node4, then the master) while the others serve. Then the same
# upgrade all at once, from 1.1.0 again, under the same load, for comparison. The cluster keeps
# running afterwards; `make demo-down` removes it.
#
# Environment: NAME (default cutover-demo), CUTOVER_DEB (cutover's package for the master,
# default bin/cutover.deb from `make deb`), GO (default go).
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=${NAME:-cutover-demo}
GO=${GO:-go}
CUTOVER_DEB=${CUTOVER_DEB:-bin/cutover.deb}
D=/usr/lib/demoapp/default/usr/sbin/demoapp
CFG=/etc/cutover/cutover.toml

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/clusterctl" ./test/cluster/clusterctl
ctl() { "$tmp/clusterctl" -name "$NAME" "$@"; }
say() { printf '\n== %s\n' "$*"; }

[ -f "$CUTOVER_DEB" ] || { echo "demo-rolling.sh: $CUTOVER_DEB is missing: run 'make deb'" >&2; exit 1; }
say "starting the 4-node cluster $NAME with demoapp 1.1.0"
ctl up -nodes 4 -live 1.1.0 -package "$CUTOVER_DEB"

# The rolling config: the node commands the load client obeys, and [strategy].
ctl exec node1 "cp -p $CFG $CFG.all-at-once
sed -i '/^\[commands\]\$/a node_drain = \"$D node drain {node}\"\nnode_undrain = \"$D node undrain {node}\"\nnode_verify = \"$D node verify {node}\"' $CFG
cat >> $CFG <<'TOML'

# Switch the nodes a batch at a time while the others serve.
[strategy]
mode = \"rolling\"
batch_size = 2
canaries = [\"node2\"]
max_failed = 0
batch_timeout = \"2m\"
TOML"
say "the rolling part of $CFG on node1"
ctl exec node1 "sed -n '/^node_/p;/^\[strategy\]/,\$p' $CFG"

say "cutover plan --to=1.2.0"
ctl exec node1 '/usr/sbin/cutover plan --to=1.2.0' || true

# measure LABEL ARGS... runs cutover on the master under load and prints what the client saw.
measure() {
	local label=$1
	shift
	# The client runs from a copy outside the version trees, as a client of the cluster would:
	# cutover ends every process of another version's tree when it starts a node's daemons.
	ctl exec node1 "cp $D /usr/local/bin/demoapp-load && rm -f /run/demoapp/load.stop /tmp/load.out; setsid nohup /usr/local/bin/demoapp-load load --seconds 600 > /tmp/load.out 2>&1 < /dev/null &"
	sleep 1
	local start end rc=0
	start=$(date +%s.%N)
	ctl exec node1 "/usr/sbin/cutover $*" || rc=$?
	end=$(date +%s.%N)
	ctl exec node1 'touch /run/demoapp/load.stop; for i in $(seq 100); do grep -q "^total" /tmp/load.out && break; sleep 0.2; done
		grep "^failed " /tmp/load.out | head -3; grep -v "^failed " /tmp/load.out'
	printf '%s: cutover exit %d in %.1fs; load: %s\n' "$label" "$rc" "$(awk "BEGIN { print $end - $start }")" \
		"$(ctl exec node1 'grep ^total /tmp/load.out')" >> "$tmp/figures"
	return 0
}

say "cutover upgrade --to=1.2.0 --yes, rolling, with the load client running"
measure "rolling 1.1.0 -> 1.2.0" upgrade --to=1.2.0 --yes

say "cutover status"
ctl exec node1 '/usr/sbin/cutover status' || true

say "back to 1.1.0, rolling, with the load client running"
measure "rolling 1.2.0 -> 1.1.0" upgrade --to=1.1.0 --yes

say "the same upgrade all at once, with the load client running"
ctl exec node1 "cp -p $CFG.all-at-once $CFG"
measure "all-at-once 1.1.0 -> 1.2.0" upgrade --to=1.2.0 --yes

say "requests the client saw"
cat "$tmp/figures"

say "the cluster $NAME keeps running; make demo-down removes it"
