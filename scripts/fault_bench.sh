#!/usr/bin/env bash
# The fault tests' long mode (issue 24): runs tests/net/fault_*.sh (or
# the ones named) with FAULT_LONG=1, 256 MiB per case, and prints their
# rows as one table: each case's rate beside the clean path of the same
# run, the sender's retransmissions and timeouts, the receiver's NAKs and
# duplicate requests, and what the impairment dropped.  Root only.
#   scripts/fault_bench.sh [fault_loss fault_delay ...]
# Environment: SRN_BUILD (default ./build), FAULT_LONG_MIB (256),
# FAULT_LONG_SLOW_MIB (10% loss and reordering jitter; default the same),
# FAULT_LONG_SECS (time bound of one stream, 3600).  Exit 0 when every
# script passed.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
export SRN_BUILD=${SRN_BUILD:-$src/build} SRN_SOURCE=$src FAULT_LONG=1
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=($(cd "$src/tests/net" && ls fault_*.sh | sed 's/\.sh$//'))
out=$(mktemp /tmp/srn-fault-bench.XXXXXX)
trap 'rm -f "$out"' EXIT
bad=0
for c in "${cases[@]}"; do
	echo "== $c"
	t0=$(date +%s)
	bash "$src/tests/net/$c.sh" | tee -a "$out" | grep -v '^ROW|'
	rc=${PIPESTATUS[0]}
	echo "== $c: exit $rc, $(( $(date +%s) - t0 )) s"
	[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || bad=1
done
echo
echo "| case | MiB | MB/s | clean MB/s | ratio | retransmits | retx packets | timeouts | NAK-seq sent | dup requests | dropped by impairment |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
awk -F'|' '$1 == "ROW" { line = "|"; for (i = 2; i <= NF; i++) line = line " " $i " |"; print line }' "$out"
exit $bad
