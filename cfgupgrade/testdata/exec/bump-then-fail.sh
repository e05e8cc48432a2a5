#!/bin/sh
# bump-then-fail.sh FILE FROM TO rewrites the version, then fails, like a
# config tool that crashed half way.
sh "$(dirname "$0")/bump.sh" "$@"
echo "error: writing the ssconf files failed" >&2
exit 4
