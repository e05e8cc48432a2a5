#!/usr/bin/env bash
# build.sh builds the container image every node of a cutover test cluster runs, without a
# registry: debootstrap a minimal Debian, trim it, and `docker import` it. The tag carries a hash
# of every input, so a second run finds the image and returns at once. It prints the image's
# name (cutover-node:<hash>) on stdout; progress goes to stderr. Besides what a node needs (sshd,
# cron, procps, iproute2, tini), it holds Debian's prometheus-node-exporter and curl, for the test
# of cutover's metrics: installed, never started unless a test starts it (on the master).
#
# Concurrent runs (several test packages starting clusters at once) are serialized with a flock;
# the one that waited finds the image built by the other.
#
# With --tag, it only prints the image's name, built or not.
#
# Environment: CUTOVER_NODE_MIRROR overrides the Debian mirror, which is otherwise read from this
# machine's apt sources.
set -euo pipefail

suite=bookworm
packages=openssh-server,openssh-client,cron,procps,iproute2,tini,curl,prometheus-node-exporter
here=$(cd "$(dirname "$0")" && pwd)
init="$here/cutover-node-init"
lock=/tmp/cutover-node-image.lock

log() { echo "build.sh: $*" >&2; }

hash=$( (cat "$here/build.sh" "$init"; echo "$packages"; echo "$suite") | sha256sum | cut -c1-16)
image="cutover-node:$hash"

# mirror prints the first Debian mirror of the machine's apt sources that carries $suite.
mirror() {
	if [ -n "${CUTOVER_NODE_MIRROR:-}" ]; then
		echo "$CUTOVER_NODE_MIRROR"
		return
	fi
	if [ -r /etc/apt/sources.list.d/debian.sources ]; then
		# deb822 stanzas: the URIs of the first stanza whose Suites name $suite itself.
		awk -v suite="$suite" '
			/^[ \t]*$/ { if (uri != "" && ok) { print uri; exit } uri = ""; ok = 0; next }
			/^URIs:/   { uri = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
			END        { if (uri != "" && ok) print uri }
		' /etc/apt/sources.list.d/debian.sources | head -n1
		return
	fi
	if [ -r /etc/apt/sources.list ]; then
		awk -v suite="$suite" '$1 == "deb" && $0 !~ /\[/ && $3 == suite { print $2; exit }
			$1 == "deb" && $2 ~ /^\[/ { for (i = 3; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($(i+1) == suite) { print $i; exit } } }' \
			/etc/apt/sources.list
	fi
}

exists() { docker image inspect "$image" >/dev/null 2>&1; }

if [ "${1:-}" = --tag ]; then
	echo "$image"
	exit 0
fi

if exists; then
	echo "$image"
	exit 0
fi

exec 9>"$lock"
flock 9
if exists; then
	echo "$image"
	exit 0
fi

url=$(mirror)
if [ -z "$url" ]; then
	log "no Debian mirror for $suite in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list; set CUTOVER_NODE_MIRROR"
	exit 1
fi
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || {
	log "debootstrap is missing (run test/setup.sh)"
	exit 1
}

dir=$(mktemp -d /var/tmp/cutover-node-rootfs.XXXXXX)
# --one-file-system: a failed debootstrap may leave /proc or /sys mounted in the tree.
trap 'rm -rf --one-file-system "$dir" "$dir.log"' EXIT
trap 'exit 1' INT TERM
start=$(date +%s)
log "debootstrap $suite into $dir (takes a minute or two)"
PATH="$PATH:/usr/sbin:/sbin" debootstrap --variant=minbase --include="$packages" "$suite" "$dir" "$url" >"$dir.log" 2>&1 || {
	tail -n 20 "$dir.log" >&2
	log "debootstrap failed"
	exit 1
}
rm -f "$dir.log"

# Trim: package lists and caches, documentation, manuals, locales.
rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/var/cache/debconf/*-old \
	"$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* \
	"$dir"/usr/share/locale/* "$dir"/usr/share/lintian "$dir"/var/log/*.log \
	"$dir"/var/log/apt/* "$dir"/debootstrap
# Every node generates its own host key at first boot.
rm -f "$dir"/etc/ssh/ssh_host_*
# No DNS: names come from /etc/hosts. Docker provides /etc/hosts and /etc/hostname at run time.
: >"$dir/etc/resolv.conf"
echo cutover-node >"$dir/etc/hostname"
# Containers lack CAP_AUDIT_CONTROL: pam_loginuid must not reject logins.
for f in sshd cron; do
	sed -i 's/^\(session[ \t]*\)required\([ \t]*pam_loginuid.so\)/\1optional\2/' "$dir/etc/pam.d/$f"
done
cat >"$dir/etc/ssh/sshd_config.d/cutover-node.conf" <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
HostKey /etc/ssh/ssh_host_ed25519_key
UseDNS no
CONF
install -m 0755 "$init" "$dir/sbin/cutover-node-init"
mkdir -p "$dir/etc/boot.d"
chmod 0700 "$dir/root"

log "importing $image"
tar --numeric-owner -C "$dir" -c . |
	docker import --change 'ENTRYPOINT ["/usr/bin/tini","--","/sbin/cutover-node-init"]' - "$image" >/dev/null

# Older images of the node are no longer referenced by anything current.
docker image ls --format '{{.Repository}}:{{.Tag}}' cutover-node | while read -r old; do
	[ "$old" = "$image" ] || docker image rm "$old" >/dev/null 2>&1 || true
done
log "built $image in $(($(date +%s) - start))s"
echo "$image"
