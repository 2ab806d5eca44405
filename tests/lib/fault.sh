# Helpers for the fault tests tests/net/fault_*.sh (sourced after e2e.sh
# and netns.sh): two "hosts", NA (server, SUBNET.1) and NB (client,
# SUBNET.2), either joined by a veth pair (fault_direct) or through a
# third namespace NR where tests/impair_relay bridges two veth pairs
# (fault_bridged); nftables drops in NA's and NB's input; a checked
# stream (tests/rc_stream_check) from NB to NA; and one line per case
# for the table (fault_row).  Root only; skips (77) otherwise.
#
# FAULT_LONG=1 is the long mode (scripts/fault_bench.sh): every case
# moves FAULT_LONG_MIB (256) MiB, with a time bound to match; the cases
# go-back-N makes crawl (10% loss, jitter that reorders) move
# FAULT_LONG_SLOW_MIB (default the same) for a quicker look.

CHECK="$SRN_BUILD/tests/rc_stream_check"
RELAY="$SRN_BUILD/tests/impair_relay"
FAULT_LONG=${FAULT_LONG:-0}
FAULT_LONG_MIB=${FAULT_LONG_MIB:-256}
# seconds a long-mode stream may take (10% loss is slow before losscc)
FAULT_LONG_SECS=${FAULT_LONG_SECS:-3600}
FAULT_LONG_SLOW_MIB=${FAULT_LONG_SLOW_MIB:-$FAULT_LONG_MIB}
NR=
RELAY_PID=

# fault_mib SHORT [slow]: the size of a case, SHORT MiB in make check.
fault_mib() {
	if [ "$FAULT_LONG" != 1 ]; then echo "$1"
	elif [ "${2:-}" = slow ]; then echo "$FAULT_LONG_SLOW_MIB"
	else echo "$FAULT_LONG_MIB"; fi
}
# fault_secs SHORT: the time bound of a stream.
fault_secs() { [ "$FAULT_LONG" = 1 ] && echo "$FAULT_LONG_SECS" || echo "$1"; }

fault_need() {
	[ -x "$CHECK" ] || t_skip "tests/rc_stream_check not built"
	[ "$(id -u)" -eq 0 ] || t_skip "needs root for ip netns"
	t_need nft ip timeout
}

fault_down() {
	if [ -n "$RELAY_PID" ]; then
		kill -TERM "$RELAY_PID" 2>/dev/null
		wait "$RELAY_PID" 2>/dev/null
	fi
	[ -n "$NR" ] && ip netns del "$NR" 2>/dev/null
	t_netns_down
	rm -f /dev/shm/softrnic-"$DA"-* /dev/shm/softrnic-"$DB"-*
}

# fault_nft_init: an empty input chain in NA and NB, table inet fault.
fault_nft_init() {
	local ns
	for ns in "$NA" "$NB"; do
		ip netns exec "$ns" nft -f - <<-EOF || t_skip "nft does not work in a namespace"
		table inet fault {
			chain input { type filter hook input priority 0; policy accept; }
		}
		EOF
	done
}

# fault_direct TAG SUBNET: NA and NB on one veth pair, nft ready.
fault_direct() {
	fault_need
	t_netns_up "srn$1" "$2"
	t_netns_devs "$1"
	trap fault_down EXIT
	SUBNET=$2
	# One datagram per packet on the wire, as a NIC sends them: a UDP
	# GSO train crosses a veth whole, and one drop would lose all of it.
	t_need ethtool
	ip netns exec "$NA" ethtool -K vA tx-udp-segmentation off gso off >/dev/null 2>&1
	ip netns exec "$NB" ethtool -K vB tx-udp-segmentation off gso off >/dev/null 2>&1
	fault_nft_init
}

# fault_bridged TAG SUBNET "RELAY ARGS": NA - vA|rA - NR - rB|vB - NB,
# impair_relay RELAY_ARGS bridging rA and rB in NR (its report in
# $T_TMP/relay at exit).  Offloads are off on every end (see
# impair_relay.c).
fault_bridged() {
	local tag=$1 rargs=$3 i ns
	fault_need
	[ -x "$RELAY" ] || t_skip "tests/impair_relay not built"
	t_need ethtool
	NA="srn${tag}A$$"; NB="srn${tag}B$$"; NR="srn${tag}R$$"
	DA="srn_$tag$$a"; DB="srn_$tag$$b"
	SUBNET=$2
	trap fault_down EXIT
	for ns in "$NA" "$NB" "$NR"; do
		ip netns add "$ns" || t_skip "cannot create namespaces"
		ip -n "$ns" link set lo up
	done
	ip -n "$NA" link add vA type veth peer name rA netns "$NR" || t_skip "no veth support"
	ip -n "$NB" link add vB type veth peer name rB netns "$NR"
	ip -n "$NA" addr add "$SUBNET.1/24" dev vA
	ip -n "$NB" addr add "$SUBNET.2/24" dev vB
	for i in "$NA vA" "$NB vB" "$NR rA" "$NR rB"; do
		set -- $i
		ip netns exec "$1" ethtool -K "$2" tx off tso off gso off gro off >/dev/null 2>&1
		ip -n "$1" link set "$2" up
	done
	ip netns exec "$NR" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	fault_nft_init
	fault_relay "$rargs"
}

# fault_relay "ARGS": (re)starts impair_relay in NR with ARGS; its report
# in $T_TMP/relay.
fault_relay() {
	local i
	[ -n "$RELAY_PID" ] && fault_relay_stop >/dev/null
	ip netns exec "$NR" "$RELAY" -t 3600 $1 rA rB >"$T_TMP/relay" 2>&1 &
	RELAY_PID=$!
	for i in $(seq 50); do
		grep -q ready "$T_TMP/relay" && break
		sleep 0.05
	done
	grep -q ready "$T_TMP/relay" || { cat "$T_TMP/relay"; t_fail "impair_relay did not start"; exit 1; }
}

# fault_relay_stop: stops impair_relay and prints what it did.
fault_relay_stop() {
	kill -TERM "$RELAY_PID" 2>/dev/null
	wait "$RELAY_PID" 2>/dev/null
	RELAY_PID=
	grep -E -- '->' "$T_TMP/relay" | sed 's/^/    /'
}

# fault_nft RULE...: the input chain of NA and NB holds just RULE.
fault_nft() {
	local ns
	for ns in "$NA" "$NB"; do
		ip netns exec "$ns" nft flush chain inet fault input
		[ $# -gt 0 ] && ip netns exec "$ns" nft add rule inet fault input "$@"
	done
}

# fault_loss PERMILLE: RoCE datagrams dropped at random in both directions.
fault_loss() { fault_nft udp dport 4791 numgen random mod 1000 "<" "$1" counter drop; }

# fault_nft_dropped: packets the counters of NA's and NB's rules dropped.
fault_nft_dropped() {
	local ns n=0 c
	for ns in "$NA" "$NB"; do
		for c in $(ip netns exec "$ns" nft list chain inet fault input |
			   sed -n 's/.*counter packets \([0-9]*\).*/\1/p'); do
			n=$((n + c))
		done
	done
	echo $n
}

# fault_stream NAME SECS "CLIENT ARGS" [DURING]: rc_stream_check server
# in NA, client in NB, both with SOFTRNIC_LOG=debug (stderr in
# NAME.{server,client}.log, stdout in NAME.{server,client}); DURING, a
# command, runs in the foreground while they do (the client's pid in
# F_CPID).  0 when both exit 0;
# F_SRV and F_CLI keep their statuses.
fault_stream() {
	local name=$1 secs=$2 args=$3 during=${4:-} port spid cpid
	port=$(t_port)
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA=$DA timeout -k 2 $((secs + 10)) \
		ip netns exec "$NA" "$SOFTRNIC" run -- "$CHECK" -d "$DA" -p "$port" -T "$secs" \
		>"$T_TMP/$name.server" 2>"$T_TMP/$name.server.log" &
	spid=$!
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vB=$DB timeout -k 2 $((secs + 10)) \
		ip netns exec "$NB" "$SOFTRNIC" run -- "$CHECK" -d "$DB" -p "$port" -T "$secs" \
		$args "$SUBNET.1" >"$T_TMP/$name.client" 2>"$T_TMP/$name.client.log" &
	cpid=$!
	F_CPID=$cpid
	[ -n "$during" ] && $during
	wait $cpid; F_CLI=$?
	wait $spid; F_SRV=$?
	if [ $F_SRV -ne 0 ] || [ $F_CLI -ne 0 ]; then
		echo "  $name: server exit $F_SRV, client ($args) exit $F_CLI"
		sed 's/^/    server | /' "$T_TMP/$name.server" | tail -5
		grep rc_stream_check "$T_TMP/$name.server.log" | sed 's/^/    server | /' | tail -8
		sed 's/^/    client | /' "$T_TMP/$name.client" | tail -5
		grep rc_stream_check "$T_TMP/$name.client.log" | sed 's/^/    client | /' | tail -8
		return 1
	fi
	return 0
}

# fault_perftest NAME SECS "ARGS": a perftest program (ARGS starts with
# its name) as server in NA and client in NB, -d and -p added; 0 when
# both exit 0.  NAME.{server,client}(.log) as fault_stream.
fault_perftest() {
	local name=$1 secs=$2 args=$3 port spid cli srv
	port=$(t_port)
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA=$DA timeout -k 2 "$secs" ip netns exec "$NA" \
		"$SOFTRNIC" run -- $args -d "$DA" -p "$port" \
		>"$T_TMP/$name.server" 2>"$T_TMP/$name.server.log" &
	spid=$!
	sleep 0.5
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vB=$DB timeout -k 2 "$secs" ip netns exec "$NB" \
		"$SOFTRNIC" run -- $args -d "$DB" -p "$port" "$SUBNET.1" \
		>"$T_TMP/$name.client" 2>"$T_TMP/$name.client.log"
	cli=$?
	wait $spid; srv=$?
	[ $cli -eq 0 ] && [ $srv -eq 0 ] && return 0
	echo "  $name: server exit $srv, client ($args) exit $cli"
	tail -3 "$T_TMP/$name.client" | sed 's/^/    client | /'
	return 1
}

# fault_perftest_mbs NAME: BW average (MB/s) of a perftest client.
fault_perftest_mbs() { awk '$1 ~ /^[0-9]+$/ && NF >= 4 { v = $4 } END { print v }' "$T_TMP/$1.client"; }

# fault_mbs NAME: the client's rate in MB/s.
fault_mbs() { sed -n 's/^client: .* \([0-9.]*\) MB\/s$/\1/p' "$T_TMP/$1.client"; }

# fault_cnt NAME SIDE COUNTER: a softrnic counter at the close of SIDE.
fault_cnt() {
	local v
	v=$(sed -n "s/^softrnic\[[0-9]*\]: $3 \([0-9]*\)$/\1/p" "$T_TMP/$1.$2.log" | tail -1)
	echo "${v:-0}"
}

# fault_row CASE NAME MIB MBS CLEAN_MBS LOST: prints the case's line of
# the table (scripts/fault_bench.sh gathers them): size, rate, its ratio
# to the clean path of the same run, the sender's retransmissions
# (requests, packets) and timeouts, the receiver's NAK-sequence and
# duplicate requests, and the packets the impairment dropped.
fault_row() {
	local ratio
	ratio=$(awk -v a="${4:-0}" -v b="${5:-0}" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }')
	echo "ROW|$1|$3|${4:-?}|${5:-?}|$ratio|$(fault_cnt "$2" client req_retransmits)|$(fault_cnt "$2" client req_retx_packets)|$(fault_cnt "$2" client req_timeouts)|$(fault_cnt "$2" server resp_nak_seq)|$(fault_cnt "$2" server resp_dup_request)|$6"
}

# fault_relay_case NAME LABEL "RELAY ARGS" MIB[:slow] "STREAM ARGS": one stream
# through impair_relay RELAY_ARGS, checked, counted and its table row
# printed beside CLEAN (MB/s; unset: the case is the clean one).
fault_relay_case() {
	local name=$1 label=$2 mib
	mib=$(fault_mib ${4/:/ })
	fault_relay "$3"
	if fault_stream "$name" "$(fault_secs 45)" "$5 -m $mib"; then
		t_pass "$label: $mib MiB, $(sed -n 's/^client: [a-z]* [a-z]*, //p' "$T_TMP/$name.client" |
			cut -d, -f1-4), $(fault_mbs "$name") MB/s"
	else
		t_fail "$label"
	fi
	fault_relay_stop
	fault_row "$label" "$name" "$mib" "$(fault_mbs "$name")" "${CLEAN:-$(fault_mbs "$name")}" 0
}

# fault_through NAME LABEL "ON" "OFF" HOLD: an RC stream paced to last
# 4 s unimpaired (12 MiB at 3 MB/s; 256 MiB at 64 in the long mode), so
# that it runs before, through and after an event: 1 s in, the command ON, HOLD seconds later OFF.  The stream must
# complete intact and span the event; F_DROPPED holds what nft dropped
# meanwhile.
fault_through() {
	local name=$1 label=$2 on=$3 off=$4 hold=$5 mib pace t0 spanned=0
	mib=$(fault_mib 12)
	pace=$(( mib / 4 > 0 ? mib / 4 : 1 ))
	F_DROPPED=0
	event() {
		sleep 1
		kill -0 "$F_CPID" 2>/dev/null || return
		$on
		sleep "$hold"
		F_DROPPED=$(fault_nft_dropped)
		$off
		kill -0 "$F_CPID" 2>/dev/null && spanned=1
	}
	t0=$(date +%s%N)
	if fault_stream "$name" "$(fault_secs 60)" "-t rc -o mix -m $mib -u 18 -b $pace" event; then
		t_pass "$label: $mib MiB paced at $pace MB/s, intact in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	else
		t_fail "$label: stream"
	fi
	[ $spanned = 1 ] && t_pass "$label met the stream (the client still running after it)" ||
		t_fail "$label did not meet the stream"
	fault_row "RC, $label (paced $pace MB/s)" "$name" "$mib" "$(fault_mbs "$name")" "$pace" "$F_DROPPED"
}
