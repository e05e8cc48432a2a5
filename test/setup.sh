#!/usr/bin/env bash
# setup.sh installs what cutover's tests need on a fresh Debian machine and is a no-op when
# everything is there: OpenSSH (real sshd for the node-access tests), pdsh (the benchmark's
# baseline), openssl (the hasher staging prefers on a node), debootstrap (the test cluster's
# node image), iproute2 (cutting nodes off), dpkg-dev, lintian and systemd (building the
# Debian package, checking it, verifying its unit), e2fsprogs and mount (the crash-point
# test's power cuts), promtool (Debian's prometheus package: the metrics tests lint
# cutover's metrics and the guide's alert rules with it), Ansible (the fleet tests) and
# chromium (the timeline page test's headless browser).
# It also creates the unprivileged login used by the SSH tests and benchmarks, whose shell
# reads no start-up files, so timings measure cutover and sshd, not a shell profile.
set -euo pipefail

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ssh-agent >/dev/null 2>&1 || need+=(openssh-client)
command -v pdsh >/dev/null 2>&1 || need+=(pdsh)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v dpkg-deb >/dev/null 2>&1 || need+=(dpkg)
command -v dpkg-architecture >/dev/null 2>&1 || need+=(dpkg-dev)
command -v lintian >/dev/null 2>&1 || need+=(lintian)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# The crash-point test's power-cut mode puts each point on a loop-mounted ext4.
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /sbin/mkfs.ext4 ] || need+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || [ -x /sbin/losetup ] || need+=(mount)
# promtool checks the metrics cutover writes and the alert rules the guide gives.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The fleet tests and demo (test/fleet, make demo-fleet) run Debian's Ansible.
command -v ansible-playbook >/dev/null 2>&1 || need+=(ansible-core)
# The timeline page test opens `cutover journal --timeline --html` in a real headless browser.
command -v chromium >/dev/null 2>&1 || need+=(chromium)

# The layout tests unpack Debian's ganeti packages: they need the package lists.
fresh_lists=no
if [ "$(id -u)" -eq 0 ] && ! apt-cache show ganeti-3.0 >/dev/null 2>&1; then
	apt-get update -qq || echo "setup: apt-get update failed; the Debian package tests will say why" >&2
	fresh_lists=yes
fi

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing ${need[*]}; run as root to install them" >&2
		exit 1
	fi
	echo "setup: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	[ "$fresh_lists" = yes ] || apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Ansible's modules run in Python on each cluster's master, which the node image lacks: Debian's
# python3 packages for bookworm, the node image's suite, kept here for test/fleet and
# test/demo-fleet.sh to unpack into the masters (beside what the image has already).
fleet_debs=/var/cache/cutover-test/python3-debs
fleet_pkgs="libexpat1 libpython3-stdlib libpython3.11-minimal libpython3.11-stdlib libreadline8
	libsqlite3-0 media-types python3 python3-minimal python3.11 python3.11-minimal readline-common"
if [ "$(id -u)" -eq 0 ] && [ ! -f "$fleet_debs/complete" ]; then
	rm -rf "$fleet_debs" && mkdir -p "$fleet_debs"
	# shellcheck disable=SC2086 # one package a word
	if (cd "$fleet_debs" && apt-get download -qq -o APT::Sandbox::User=root $fleet_pkgs >/dev/null); then
		touch "$fleet_debs/complete"
	else
		echo "setup: downloading python3's packages for the fleet tests failed; they will say why" >&2
	fi
fi

# The test login: a plain /bin/sh user, so a remote command starts no profile scripts.
if [ "$(id -u)" -eq 0 ] && ! id cutover-test >/dev/null 2>&1; then
	useradd --system --home-dir /var/lib/cutover-test --create-home --shell /bin/sh cutover-test
fi
# A "!" password marks the account locked, which sshd refuses even for key logins; "*" only
# means no password.
if [ "$(id -u)" -eq 0 ] && [ "$(getent shadow cutover-test | cut -d: -f2)" = "!" ]; then
	usermod -p '*' cutover-test
fi
# sshd refuses to start without its privilege-separation directory.
[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd
