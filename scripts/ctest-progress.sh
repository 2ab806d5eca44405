#!/usr/bin/env bash
# scripts/ctest-progress.sh [CTEST ARGS...]: run ctest in the current
# directory, passing its output through as it comes, and print a line
# naming the running test whenever ctest has said nothing for
# SRN_PROGRESS_SECS (default 5) seconds: ctest itself is silent until a
# test ends, and the longest tests take minutes.  The last lines are
# ctest's own summary; the exit status is ctest's.
set -uo pipefail
every=${SRN_PROGRESS_SECS:-5}
case $every in ''|*[!0-9]*|0) echo "SRN_PROGRESS_SECS must be a positive integer" >&2; exit 2;; esac

relay() {
	local line part="" name="" since=$SECONDS rc
	while :; do
		IFS= read -r -t "$every" line
		rc=$?
		if [ $rc -eq 0 ]; then
			line=$part$line part=""
			printf '%s\n' "$line"
			# "      Start  12: udp/e2e/perftest_ud_uc"
			if [[ $line =~ ^\ *Start\ +[0-9]+:\ +(.*)$ ]]; then
				name=${BASH_REMATCH[1]} since=$SECONDS
			fi
		elif [ $rc -gt 128 ]; then
			# timed out: show what came of a partial line, then the news
			part=$part$line
			[ -n "$part" ] && printf '%s\n' "$part"
			part=""
			[ -n "$name" ] &&
				printf '        ... %s running for %d s\n' "$name" $((SECONDS - since))
		else
			[ -n "$part$line" ] && printf '%s\n' "$part$line"
			return 0
		fi
	done
}

ctest "$@" 2>&1 | relay
exit "${PIPESTATUS[0]}"
