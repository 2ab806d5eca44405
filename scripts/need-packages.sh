#!/usr/bin/env bash
# Install the Debian packages named on the command line that are missing.
# As root: apt-get install them.  Otherwise: print the exact command and fail.
set -euo pipefail
missing=()
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
	echo "softrnic: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
	echo "softrnic: missing packages; run:" >&2
	echo "  sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
