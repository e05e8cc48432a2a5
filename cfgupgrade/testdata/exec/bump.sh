#!/bin/sh
# bump.sh FILE FROM TO rewrites the "version" of the JSON config FILE from FROM
# to TO, the way an application's own config upgrade tool would.
set -e
sed "s/\"version\": \"$2\"/\"version\": \"$3\"/" "$1" > "$1.new"
mv "$1.new" "$1"
echo "config upgraded from $2 to $3"
