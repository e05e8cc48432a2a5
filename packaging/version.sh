#!/bin/sh
# version.sh prints cutover's version, which is also its Debian package's version: the newest
# tag vX.Y.Z reachable from HEAD as X.Y.Z (with +git<commits>.<commit> after it when HEAD is
# past the tag), otherwise 0~git<commit time>.<commit>; "+dirty" marks a changed tree.
set -eu
cd "$(dirname "$0")/.."
if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	echo 0~dev
	exit 0
fi
hash=$(git rev-parse --short=12 HEAD)
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
	v=${tag#v}
	n=$(git rev-list --count "$tag..HEAD")
	[ "$n" -eq 0 ] || v="$v+git$n.$hash"
else
	v="0~git$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S).$hash"
fi
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	v="$v+dirty"
fi
echo "$v"
