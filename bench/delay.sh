#!/usr/bin/env bash
# RC WRITE through a lossy, delayed bridge, beside the bridge's own
# bandwidth, in one run (issue 24).  Two network namespaces this script
# creates (192.168.99.0/24, addresses only inside them) joined through a
# third where tests/impair_relay bridges them (tests/lib/fault.sh), and
# for each case: ib_write_bw 64 KiB x ITERS for the rate, then
# tests/rc_stream_check (RC WRITEs with immediate, every byte checked)
# for integrity.  Printed as one markdown table: rate, its ratio to the
# clean softrnic run and to the bridge (iperf3 TCP through the clean
# relay, measured right before each case: this host is shared, and its
# rate drifts over minutes), RoCE payload bytes the relay lost on the data
# direction against the bytes the client resent, the window, NAKs,
# timeouts, and the stream's verdict.  Root only.
#
#   sudo bench/delay.sh [-n ITERS] [-m STREAM_MIB] [-g] [-r] [-M MTU] [-B BASE_BUILD]
#
# -n: ib_write_bw iterations (4096: 256 MiB); -m: stream size (64 MiB;
# the 10% case always moves 256 MiB); -g: go-back-N (SR is on by
# default: SOFTRNIC_SELECTIVE_RETX=1, as two softrnic hosts agree by
# ECE); -r: the delay cases' jitter reorders (default: in order, -O);
# -M: the links' MTU (default 1500, where RoCE's path MTU is 1024 and
# TCP's segments 1448 bytes; 4200 fits a 4096-byte RoCE payload);
# -B: also every case with the softrnic of another build directory (a
# build of the commit before a change), right before this one's, so the
# table holds before and after from one run.
# Environment: SRN_BUILD (./build); DELAY_CASES, a regex: only the
# cases whose label matches; DELAY_KEEP, a directory: the logs kept.
set -u
ITERS=4096 SMIB=64 SR=1 ORDER=-O BASE= MTU=
while getopts n:m:grM:B: o; do
	case $o in
	n) ITERS=$OPTARG ;;
	m) SMIB=$OPTARG ;;
	g) SR=0 ;;
	r) ORDER= ;;
	M) MTU=$OPTARG ;;
	B) BASE=$(cd "$OPTARG" && pwd) || exit 2 ;;
	*) exit 2 ;;
	esac
done
export SOFTRNIC_SELECTIVE_RETX=$SR
. "$(dirname "$0")/../tests/lib/e2e.sh"
. "$(dirname "$0")/../tests/lib/netns.sh"
. "$(dirname "$0")/../tests/lib/fault.sh"
t_need ib_write_bw iperf3
fault_bridged dl 192.168.99 ""
if [ -n "$MTU" ]; then
	for i in "$NA vA" "$NB vB" "$NR rA" "$NR rB"; do
		set -- $i
		ip -n "$1" link set "$2" mtu "$MTU" || t_skip "MTU $MTU refused"
	done
	fault_relay ""
fi
ROWS=$T_TMP/rows
OWN=$SRN_BUILD

# sum NAME LOG / peak NAME LOG: a counter of softrnic's dump at close
sum() { awk -v n="$1" '$2 == n { s += $3 } END { print s + 0 }' "$2"; }
peak() { awk -v n="$1" '$2 == n && $3 > m { m = $3 } END { print m + 0 }' "$2"; }
# lost_bytes: RoCE payload the relay lost from NB (client) to NA
lost_bytes() { sed -n 's/.*rB -> rA: .* lost_roce_bytes \([0-9]*\).*/\1/p' "$T_TMP/relay"; }
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

# bridge LABEL "RELAY ARGS": iperf3 TCP NB -> NA for 4 s, MiB/s
bridge() {
	local port mbs
	port=$(t_port)
	fault_relay "$2"
	timeout -k 2 20 ip netns exec "$NA" iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
	local spid=$!
	sleep 0.5
	timeout -k 2 20 ip netns exec "$NB" iperf3 -c "$SUBNET.1" -p "$port" -t 4 -f m \
		>"$T_TMP/iperf" 2>&1
	wait $spid
	fault_relay_stop >/dev/null
	# Mbit/s of the receiver -> MiB/s, as perftest's MB (2^20)
	mbs=$(awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") v = $i }
		   END { printf "%.1f", v * 1e6 / 8 / 1048576 }' "$T_TMP/iperf")
	echo "$mbs"
}

# softrnic BUILD LABEL "RELAY ARGS" MIB: one case with BUILD's softrnic
# and rc_stream_check, its row in $ROWS; CLEAN_<tag> is the clean rate
softrnic() {
	local build=$1 label=$2 rargs=$3 mib=$4 mbs lost retx verdict smbs tag clean br
	tag=$([ "$build" = "$OWN" ] && echo this || echo base)
	br=$(bridge clean "")
	SOFTRNIC=$build/bin/softrnic CHECK=$build/tests/rc_stream_check
	fault_relay "$rargs"
	if fault_perftest bw 120 "ib_write_bw -x 0 -F -s 65536 -n $ITERS"; then
		mbs=$(fault_perftest_mbs bw)
	else
		mbs=0
	fi
	fault_relay_stop >/dev/null
	lost=$(lost_bytes) retx=$(sum req_retx_bytes "$T_TMP/bw.client.log")
	fault_relay "$rargs"
	if fault_stream st 600 "-t rc -o write -m $mib"; then
		verdict="intact" smbs=$(fault_mbs st)
	else
		verdict="FAILED" smbs=0
	fi
	fault_relay_stop >/dev/null
	clean=CLEAN_$tag
	[ -z "${!clean:-}" ] && printf -v "$clean" %s "$mbs"
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s/%s | %s | %s | %s MiB %s, %s MB/s |\n' \
		"$label" "$rargs" "$tag" "$mbs" "$(ratio "$mbs" "${!clean}")" "$br" "$(ratio "$mbs" "$br")" \
		"${lost:-0}" "$retx" "$(ratio "$retx" "$lost")" "$(peak req_cwnd "$T_TMP/bw.client.log")" \
		"$(sum comp_nak_seq "$T_TMP/bw.client.log")" "$(sum resp_nak_seq "$T_TMP/bw.server.log")" \
		"$(sum req_timeouts "$T_TMP/bw.client.log")" "$(sum req_probes "$T_TMP/bw.client.log")" \
		"$mib" "$verdict" "${smbs:-?}" >>"$ROWS"
	echo "  $label ($tag): $mbs MB/s (bridge $br), lost $lost B, resent $retx B, stream $verdict"
	if [ -n "${DELAY_KEEP:-}" ]; then
		mkdir -p "$DELAY_KEEP/$tag-${label//[^a-z0-9]/_}"
		cp "$T_TMP"/bw.* "$T_TMP"/st.* "$DELAY_KEEP/$tag-${label//[^a-z0-9]/_}/"
	fi
	SOFTRNIC=$OWN/bin/softrnic CHECK=$OWN/tests/rc_stream_check
}

# both LABEL "RELAY ARGS" MIB: the case with the base build, then this one
both() {
	[[ "$1" =~ ${DELAY_CASES:-.} ]] || return 0
	[ -n "$BASE" ] && softrnic "$BASE" "$@"
	softrnic "$OWN" "$@"
}

J="-d 5 -j 1 $ORDER"
BRIDGE=$(bridge clean "")
BRIDGE_D=$(bridge delay "$J")
echo "  bridge: $BRIDGE MiB/s clean, $BRIDGE_D MiB/s at $J (iperf3 TCP)"
both "clean" "" "$SMIB"
both "1% loss" "-l 10" "$SMIB"
both "10% loss" "-l 100" 256
both "5 ms +- 1 ms" "$J" "$SMIB"
both "5 ms +- 1 ms, 1% loss" "$J -l 10" "$SMIB"

echo
echo "ib_write_bw 64 KiB x $ITERS, SR $([ "$SR" = 1 ] && echo on || echo off), MTU ${MTU:-1500};" \
	"bridge (iperf3 TCP through the relay): $BRIDGE MiB/s clean, $BRIDGE_D MiB/s with '$J'"
echo
echo "| case | relay | build | MiB/s | / clean | bridge MiB/s | / bridge | lost B | resent B | resent/lost | cwnd at end | NAKs rx/tx | timeouts | probes | stream |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
cat "$ROWS"
t_done
