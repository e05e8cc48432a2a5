#!/usr/bin/env bash
# build.sh builds the image every node of cutover's Ganeti test cluster runs, without a registry:
# debootstrap a minimal Debian bookworm, install Debian's Ganeti 3.0.2 (live) and Ganeti 3.1
# from bookworm-backports side by side with the package manager, and `docker import` it. The tag
# carries a hash of every input, so a second run finds the image and returns at once. It prints
# the image's name (cutover-ganeti-node:<hash>) on stdout; progress goes to stderr.
#
# The nodes share one SSH host key and one root key (id_rsa), as the nodes of a Ganeti cluster
# do; both are generated at build time and are good for tests only.
#
# With --tag, it only prints the image's name, built or not.
#
# Environment: CUTOVER_NODE_MIRROR overrides the Debian mirror, which is otherwise read from this
# machine's apt sources.
set -euo pipefail

suite=bookworm
packages=openssh-server,openssh-client,cron,procps,iproute2,tini,python3,ca-certificates
ganeti_live="ganeti=3.0.2-3 ganeti-3.0=3.0.2-3 ganeti-haskell-3.0=3.0.2-3 ganeti-htools-3.0=3.0.2-3"
ganeti_next="ganeti-3.1/$suite-backports ganeti-haskell-3.1/$suite-backports ganeti-htools-3.1/$suite-backports"
here=$(cd "$(dirname "$0")" && pwd)
init="$here/ganeti-node-init"
lock=/tmp/cutover-ganeti-node-image.lock

log() { echo "build.sh: $*" >&2; }

hash=$( (cat "$here/build.sh" "$init"; echo "$packages $ganeti_live $ganeti_next $suite") | sha256sum | cut -c1-16)
image="cutover-ganeti-node:$hash"

# mirror prints the first Debian mirror of the machine's apt sources that carries $suite.
mirror() {
	if [ -n "${CUTOVER_NODE_MIRROR:-}" ]; then
		echo "$CUTOVER_NODE_MIRROR"
		return
	fi
	if [ -r /etc/apt/sources.list.d/debian.sources ]; then
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
	log "no Debian mirror for $suite in the apt sources; set CUTOVER_NODE_MIRROR"
	exit 1
fi
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || {
	log "debootstrap is missing (run test/setup.sh)"
	exit 1
}

dir=$(mktemp -d /var/tmp/cutover-ganeti-rootfs.XXXXXX)
cleanup() {
	umount "$dir/proc" 2>/dev/null || true
	rm -rf --one-file-system "$dir" "$dir.log"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
start=$(date +%s)
log "debootstrap $suite into $dir (takes a few minutes)"
PATH="$PATH:/usr/sbin:/sbin" debootstrap --variant=minbase --include="$packages" "$suite" "$dir" "$url" >"$dir.log" 2>&1 || {
	tail -n 20 "$dir.log" >&2
	log "debootstrap failed"
	exit 1
}

# Nothing starts during the installation.
printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
chmod 0755 "$dir/usr/sbin/policy-rc.d"
echo "deb $url $suite-backports main" >"$dir/etc/apt/sources.list.d/backports.list"
mount -t proc proc "$dir/proc"
log "installing Ganeti 3.0.2 and 3.1"
chroot "$dir" /bin/sh -c "export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin
	apt-get update -qq &&
	apt-get install -y -qq --no-install-recommends $ganeti_live &&
	apt-mark hold ganeti &&
	apt-get install -y -qq --no-install-recommends $ganeti_next" >>"$dir.log" 2>&1 || {
	tail -n 30 "$dir.log" >&2
	log "installing Ganeti failed"
	exit 1
}
umount "$dir/proc"
rm -f "$dir.log" "$dir/usr/sbin/policy-rc.d"

# Two of Ganeti's own timeouts, lengthened for a test cluster whose three nodes share two
# cores with the rest of make test: the TLS connect of an RPC to a node daemon (5 s: verify
# and jobs failed with "Error 28: SSL connection timeout" under that load) and the wait of
# gnt-cluster init and node add for a node daemon just started (10 s). Nodes of their own
# answer in well under both; nothing else of Debian's packages changes.
for v in 2.16 3.0 3.1; do
	c="$dir/usr/share/ganeti/$v/ganeti/_constants.py"
	b="$dir/usr/share/ganeti/$v/ganeti/bootstrap.py"
	[ -e "$c" ] || continue
	sed -i 's/^RPC_CONNECT_TIMEOUT = 5$/RPC_CONNECT_TIMEOUT = 30/' "$c"
	sed -i 's/^_DAEMON_READY_TIMEOUT = 10.0$/_DAEMON_READY_TIMEOUT = 60.0/' "$b"
	grep -q '^RPC_CONNECT_TIMEOUT = 30$' "$c" && grep -q '^_DAEMON_READY_TIMEOUT = 60.0$' "$b" || {
		log "Ganeti $v: the timeouts to lengthen are not where they were"
		exit 1
	}
	rm -f "$dir/usr/share/ganeti/$v/ganeti/__pycache__/_constants".*.pyc "$dir/usr/share/ganeti/$v/ganeti/__pycache__/bootstrap".*.pyc
done

# Trim: package lists and caches, documentation, manuals, locales.
rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/* "$dir"/var/cache/debconf/*-old \
	"$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/* \
	"$dir"/usr/share/locale/* "$dir"/usr/share/lintian "$dir"/var/log/*.log \
	"$dir"/var/log/apt/* "$dir"/debootstrap
: >"$dir/etc/resolv.conf"
echo ganeti-node >"$dir/etc/hostname"
for f in sshd cron; do
	sed -i 's/^\(session[ \t]*\)required\([ \t]*pam_loginuid.so\)/\1optional\2/' "$dir/etc/pam.d/$f"
done
# One host key (RSA, as Ganeti distributes it) and one root key for every node.
rm -f "$dir"/etc/ssh/ssh_host_*
ssh-keygen -q -t rsa -b 2048 -N '' -C ganeti-test-cluster -f "$dir/etc/ssh/ssh_host_rsa_key"
install -d -m 0700 "$dir/root/.ssh"
ssh-keygen -q -t rsa -b 2048 -N '' -C root@ganeti-test-cluster -f "$dir/root/.ssh/id_rsa"
cp "$dir/root/.ssh/id_rsa.pub" "$dir/root/.ssh/authorized_keys"
cat >"$dir/etc/ssh/sshd_config.d/cutover-node.conf" <<'CONF'
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
HostKey /etc/ssh/ssh_host_rsa_key
UseDNS no
CONF
# cron mails what a job prints: keep it in a log instead.
printf '#!/bin/sh\n{ echo "--- $(date -u +%%FT%%TZ)"; cat; } >>/var/log/cron-mail.log\n' >"$dir/usr/sbin/sendmail"
chmod 0755 "$dir/usr/sbin/sendmail"
install -m 0755 "$init" "$dir/sbin/ganeti-node-init"
chmod 0700 "$dir/root"

log "importing $image"
tar --numeric-owner -C "$dir" -c . |
	docker import --change 'ENTRYPOINT ["/usr/bin/tini","--","/sbin/ganeti-node-init"]' - "$image" >/dev/null
docker image ls --format '{{.Repository}}:{{.Tag}}' cutover-ganeti-node | while read -r old; do
	[ "$old" = "$image" ] || docker image rm "$old" >/dev/null 2>&1 || true
done
log "built $image in $(($(date +%s) - start))s"
echo "$image"
