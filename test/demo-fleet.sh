#!/usr/bin/env bash
# demo-fleet.sh upgrades a fleet of three clusters with Ansible: three 2-node clusters of the test
# image (package test/cluster) at demoapp 1.0.0, without 1.2.0 anywhere. ansible-playbook runs the
# fleet playbook (ansible/playbooks/fleet-upgrade.yml) over SSH to the three masters: it copies the
# 1.2.0 release tarball to every master and pre-caches it on every node with cutover stage, then
# upgrades the canary cluster alone, then the two others in waves, and prints the summary. The
# clusters are removed at the end unless KEEP=1.
#
# Ansible's modules need python3 on the masters, which the node image lacks: the demo unpacks
# Debian's python3 packages (downloaded by test/setup.sh) into each master.
#
# Environment: CUTOVER_DEB (cutover's package, default bin/cutover.deb), GO (default go),
# KEEP (1 keeps the clusters running), FLEET (the clusters' name prefix, default cutover-fleet).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
CUTOVER_DEB=${CUTOVER_DEB:-bin/cutover.deb}
FLEET=${FLEET:-cutover-fleet}
DEBS=${CUTOVER_PYTHON_DEBS:-/var/cache/cutover-test/python3-debs}
CLUSTERS=(lab-1 fra-1 iad-1)

[ -f "$CUTOVER_DEB" ] || { echo "demo-fleet.sh: $CUTOVER_DEB is missing: run 'make deb'" >&2; exit 1; }
ls "$DEBS"/*.deb >/dev/null 2>&1 || { echo "demo-fleet.sh: no python3 packages in $DEBS: run test/setup.sh" >&2; exit 1; }
command -v ansible-playbook >/dev/null || { echo "demo-fleet.sh: ansible-playbook is missing: run test/setup.sh" >&2; exit 1; }

tmp=$(mktemp -d)
cleanup() {
	if [ "${KEEP:-}" != 1 ]; then
		for c in "${CLUSTERS[@]}"; do "$tmp/clusterctl" -name "$FLEET-$c" down >/dev/null 2>&1 || true; done
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
"$GO" build -o "$tmp/clusterctl" ./test/cluster/clusterctl
ctl() { local c=$1; shift; "$tmp/clusterctl" -name "$FLEET-$c" "$@"; }
say() { printf '\n== %s\n' "$*"; }

say "starting three 2-node clusters (${CLUSTERS[*]}) with demoapp 1.0.0 live and no 1.2.0"
for c in "${CLUSTERS[@]}"; do
	ctl "$c" up -nodes 2 -package "$CUTOVER_DEB" -missing 1.2.0 >"$tmp/up-$c.log" 2>&1 &
done
for c in "${CLUSTERS[@]}"; do wait -n || { cat "$tmp"/up-*.log >&2; exit 1; }; done
for c in "${CLUSTERS[@]}"; do tail -n 3 "$tmp/up-$c.log"; done

say "python3 and the operator's SSH key on each master; the inventory"
mkdir -p "$tmp/python"
for d in "$DEBS"/*.deb; do dpkg-deb -x "$d" "$tmp/python"; done
ssh-keygen -q -t ed25519 -N '' -C fleet-operator -f "$tmp/id_ed25519"
{
	echo "cutover_fleet:"
	echo "  vars: {ansible_user: root, ansible_python_interpreter: /usr/bin/python3, ansible_ssh_private_key_file: $tmp/id_ed25519,"
	echo "         ansible_ssh_common_args: '-o UserKnownHostsFile=$tmp/known_hosts -o StrictHostKeyChecking=yes'}"
	echo "  children:"
} >"$tmp/inventory.yml"
for c in "${CLUSTERS[@]}"; do
	master=$FLEET-$c-node1
	tar -C "$tmp/python" -c . | docker exec -i "$master" tar -x -C / --keep-directory-symlink
	docker exec -i "$master" sh -c 'cat >>/root/.ssh/authorized_keys' <"$tmp/id_ed25519.pub"
	addr=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$master")
	echo "$addr $(docker exec "$master" cat /etc/ssh/ssh_host_ed25519_key.pub | cut -d' ' -f1,2)" >>"$tmp/known_hosts"
	if [ "$c" = "${CLUSTERS[0]}" ]; then
		printf '    cutover_canary:\n      hosts:\n        %s: {ansible_host: %s}\n    waves:\n      hosts:\n' "$c" "$addr"
	else
		printf '        %s: {ansible_host: %s}\n' "$c" "$addr"
	fi >>"$tmp/inventory.yml"
done
cat "$tmp/inventory.yml"

say "the demoapp 1.2.0 release tarball, on this machine (the Ansible controller)"
ctl "${CLUSTERS[0]}" release node1 1.2.0 /root/demoapp-1.2.0.tar.gz >/dev/null
docker cp -q "$FLEET-${CLUSTERS[0]}-node1:/root/demoapp-1.2.0.tar.gz" "$tmp/demoapp-1.2.0.tar.gz"
ls -l "$tmp/demoapp-1.2.0.tar.gz"

say "ansible-playbook playbooks/fleet-upgrade.yml -e cutover_version=1.2.0 (canary ${CLUSTERS[0]}, then waves)"
start=$(date +%s%N)
rc=0
(cd ansible && ANSIBLE_CONFIG=ansible.cfg ansible-playbook -i "$tmp/inventory.yml" playbooks/fleet-upgrade.yml \
	-e cutover_version=1.2.0 -e cutover_release="$tmp/demoapp-1.2.0.tar.gz" -e cutover_poll=1) || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
printf '\nthe fleet upgrade took %d.%01ds (ansible-playbook exited %d)\n' $((ms / 1000)) $((ms % 1000 / 100)) "$rc"

say "each cluster after"
for c in "${CLUSTERS[@]}"; do
	printf '%-6s ' "$c"; ctl "$c" exec node1 '/usr/sbin/cutover status' | head -n 1
done
[ "${KEEP:-}" = 1 ] && echo "the clusters keep running: $FLEET-{${CLUSTERS[*]// /,}}; 'go run ./test/cluster/clusterctl -name NAME down' removes one"
exit "$rc"
