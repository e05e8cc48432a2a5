#!/usr/bin/env bash
# build-deb.sh builds cutover's Debian package with Debian's own tools (dpkg-deb) from a
# static cutover binary and the files of this repository, and prints the package's path.
#
#   packaging/build-deb.sh BINARY OUTDIR
#
# Environment: DEB_VERSION (default: what packaging/version.sh prints, as `make build` puts into
# the binary),
# DEB_ARCH (default: dpkg --print-architecture), DEB_MAINTAINER, GO (default go; it finds the
# licenses of the Go modules the binary contains).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 BINARY OUTDIR" >&2; exit 2; }
bin=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
GO=${GO:-go}

[ -f "$bin" ] && [ -x "$bin" ] || { echo "build-deb.sh: $bin: not an executable file" >&2; exit 2; }
command -v dpkg-deb >/dev/null || { echo "build-deb.sh: dpkg-deb is missing (run test/setup.sh)" >&2; exit 1; }

commit_time() { git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s; }
DEB_VERSION=${DEB_VERSION:-$("$here/version.sh")}
DEB_ARCH=${DEB_ARCH:-$(dpkg --print-architecture)}
DEB_MAINTAINER=${DEB_MAINTAINER:-cutover maintainers <maintainers@cutover.invalid>}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(commit_time)}

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
umask 022
# Every directory the package ships is 0755 root:root, the data archive's root entry ./
# included (mktemp makes it 0700): dpkg would otherwise give / those modes on install.
chmod 0755 "$root"
doc=$root/usr/share/doc/cutover

install -D -m 0755 "$bin" "$root/usr/sbin/cutover"
install -D -m 0644 "$repo/docs/cutover.8" "$root/usr/share/man/man8/cutover.8"
gzip -9n "$root/usr/share/man/man8/cutover.8"
install -D -m 0644 "$here/cutover-resume.service" "$root/lib/systemd/system/cutover-resume.service"
install -D -m 0644 "$here/cutover.cron" "$root/usr/share/cutover/cutover.cron"
install -D -m 0644 "$repo/docs/completion/cutover.bash" "$root/usr/share/bash-completion/completions/cutover"
install -D -m 0644 "$repo/docs/completion/_cutover" "$root/usr/share/zsh/vendor-completions/_cutover"
# /etc/cutover is 0755 as dpkg expects; cutover.toml itself must be root's and not writable
# by others (cutover refuses it otherwise), and holds no secret: identity files are apart.
install -d -m 0755 "$root/etc/cutover"
install -D -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/cutover"
# The docs of docs/ go beside README.md, whose links into docs/ are made relative to them (a
# test checks that every link of an installed document names an installed file).
install -d -m 0755 "$doc"
sed -e 's#](docs/#](#g' "$repo/README.md" >"$doc/README.md"
chmod 0644 "$doc/README.md"
for f in guide.md configuration.md migrations.md json.md metrics.md cli.md design.md; do
	install -m 0644 "$repo/docs/$f" "$doc/$f"
done
# The pictures the docs show (the guide's timeline).
for f in "$repo"/docs/*.png; do
	install -m 0644 "$f" "$doc/${f##*/}"
done
install -D -m 0644 "$repo/docs/examples/demo.toml" "$doc/examples/demo.toml"
install -m 0644 "$repo/docs/examples/demo-rolling.toml" "$doc/examples/demo-rolling.toml"
install -m 0644 "$repo/docs/examples/ganeti.toml" "$doc/examples/ganeti.toml"

# The changelog says which commit the package was built from.
{
	printf 'cutover (%s) unstable; urgency=medium\n\n' "$DEB_VERSION"
	printf '  * Built from commit %s.\n\n' "$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)"
	printf ' -- %s  %s\n' "$DEB_MAINTAINER" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"

# The copyright file names every Go module linked into the binary, with its license.
{
	printf 'cutover\n\nThis package contains cutover and the Go modules linked into its binary.\n'
	printf 'The license of each module follows, as it ships it.\n'
	modcache=$("$GO" env GOMODCACHE)
	"$GO" version -m "$bin" | awk '$1 == "dep" || $1 == "=>" { print $2, $3 }' | while read -r mod ver; do
		dir=$modcache/$(printf '%s' "$mod" | sed 's/[A-Z]/!\L&/g')@$ver
		lic=$(ls "$dir"/LICENSE* "$dir"/COPYING* 2>/dev/null | head -n1 || true)
		printf '\n--------------------------------------------------------------------------\n%s %s\n\n' "$mod" "$ver"
		if [ -n "$lic" ]; then cat "$lic"; else echo "(license file not found in the module cache)"; fi
	done
} >"$doc/copyright"
chmod 0644 "$doc/copyright"

mkdir -m 0755 "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$DEB_VERSION/" -e "s/@ARCH@/$DEB_ARCH/" -e "s/@MAINTAINER@/$DEB_MAINTAINER/" -e "s/@SIZE@/$size/" \
	"$here/debian/control.in" >"$root/DEBIAN/control"
install -m 0755 "$here/debian/postinst" "$here/debian/postrm" "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
find "$root" -path "$root/DEBIAN" -prune -o -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb=$out/cutover_${DEB_VERSION}_${DEB_ARCH}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
