#!/usr/bin/env bash
# Several RC flows between two hosts at once (issue 24's "speed under
# contention"): two network namespaces joined by a veth pair, N
# ib_write_bw server processes in one and N clients in the other, for N =
# 1, 4 and 16, first with port-4791 steering (the default, net/steer.h)
# and then with SOFTRNIC_STEER=0 (one engine per host receives and hands
# the others' packets on), in the same run.  Each flow moves 64 KiB WRITEs
# for FLOW_SECS seconds (perftest -D).  Prints a table: aggregate MB/s,
# aggregate / one flow alone, and the slowest flow / its fair share.
# Root only (namespaces).  Usage: bench/flows.sh [FLOW_SECS (default 4)]
SRN_BUILD=${SRN_BUILD:-$(cd "$(dirname "$0")/.." && pwd)/build}
. "$(dirname "$0")/../tests/lib/e2e.sh"
. "$(dirname "$0")/../tests/lib/netns.sh"
t_need ib_write_bw
SECS=${1:-4}
t_netns_up srnbf 192.168.81
t_netns_devs bf

# flows N: the MB/s of each of N flows at once, one per line ("-" for a
# flow that failed).
flows() {
	local n=$1 base i spids=() cpids=()
	base=$(t_port)
	for i in $(seq 1 "$n"); do
		SOFTRNIC_DEVICES=vA=$DA timeout -k 2 $((SECS + 60)) ip netns exec "$NA" \
			"$SOFTRNIC" run -- ib_write_bw -x 0 -F -s 65536 -D "$SECS" -u 18 \
			-d "$DA" -p $((base + i)) >"$T_TMP/s$i" 2>&1 &
		spids+=($!)
	done
	sleep $((n / 8 + 1))
	for i in $(seq 1 "$n"); do
		SOFTRNIC_DEVICES=vB=$DB timeout -k 2 $((SECS + 60)) ip netns exec "$NB" \
			"$SOFTRNIC" run -- ib_write_bw -x 0 -F -s 65536 -D "$SECS" -u 18 \
			-d "$DB" -p $((base + i)) 192.168.81.1 >"$T_TMP/c$i" 2>&1 &
		cpids+=($!)
	done
	for i in $(seq 1 "$n"); do
		wait "${cpids[$((i - 1))]}"
		wait "${spids[$((i - 1))]}"
		awk '$1 == 65536 && $2 ~ /^[0-9]+$/ { v = $4 } END { print v ? v : "-" }' "$T_TMP/c$i"
	done
}

printf '| steering | flows | aggregate MB/s | aggregate / one flow | slowest / fair share |\n'
printf '|---|---|---|---|---|\n'
for steer in 1 0; do
	one=
	for n in 1 4 16; do
		res=$(SOFTRNIC_STEER=$steer flows "$n")
		echo "$res" | tr '\n' ' ' >"$T_TMP/last"
		line=$(echo "$res" | awk -v n="$n" -v one="${one:-0}" '
			$1 == "-" { bad++; next }
			{ s += $1; if (min == "" || $1 < min) min = $1 }
			END {
				if (bad) { printf "%d of %d flows failed", bad, n; exit }
				r = one > 0 ? sprintf("%.2f", s / one) : "1"
				printf "%.0f | %s | %.2f", s, r, min / (s / n)
			}')
		[ "$n" = 1 ] && one=$(echo "$res" | head -1)
		printf '| %s | %d | %s |\n' "$([ $steer = 1 ] && echo on || echo off)" "$n" "$line"
	done
done
