#!/bin/sh
# fail.sh fails before touching anything, like a config tool that cannot lock
# the config.
echo "checking config"
echo "error: cannot lock the config: resource temporarily unavailable" >&2
exit 3
