#!/usr/bin/env bash
# demo.sh shows cutover on a real Ganeti cluster of three containers (test/ganeti): Debian's
# Ganeti 3.0.2 live, 3.1 installed beside it, cutover set up on the master as docs/guide.md
# says. It upgrades the cluster to 3.1 with cutover and shows gnt-cluster version and verify.
# The cluster keeps running afterwards; `make ganeti-down` removes it.
#
# Environment: GANETI_NAME (the cluster's name), CUTOVER_BIN (default bin/cutover).
set -euo pipefail
cd "$(dirname "$0")/../.."

NAME=${GANETI_NAME:?GANETI_NAME is not set}
CUTOVER_BIN=${CUTOVER_BIN:-bin/cutover}
say() { printf '\n== %s\n' "$*"; }
on() { docker exec "$NAME-node1" sh -c "$1"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The drop-in config, except that verify ignores ENODESETUP: containers have no
# /proc/sysrq-trigger.
sed 's|^verify = "/usr/sbin/gnt-cluster verify"$|verify = "/usr/sbin/gnt-cluster verify --ignore-errors=ENODESETUP"|' \
	docs/examples/ganeti.toml >"$tmp/cutover.toml"

say "starting the Ganeti cluster $NAME (the first run builds the node image: a few minutes)"
test/ganeti/ganeti-cluster "$NAME" up "$CUTOVER_BIN" "$tmp/cutover.toml"
say "gnt-cluster version"
on '/usr/sbin/gnt-cluster version'
say "cutover status"
on '/usr/sbin/cutover status'
say "cutover upgrade --to=3.1"
on '/usr/sbin/cutover upgrade --to=3.1 --yes'
say "gnt-cluster version"
on '/usr/sbin/gnt-cluster version'
say "gnt-cluster verify"
on '/usr/sbin/gnt-cluster verify --ignore-errors=ENODESETUP'
say "the cluster keeps running: docker exec -it $NAME-node1 bash; 'make ganeti-down' removes it"
