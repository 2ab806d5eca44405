#!/usr/bin/env bash
# An rdma_cm peer that dies does not hang its client across hosts: two
# network namespaces this test creates, joined by a veth pair
# (192.168.79.0/24, addresses only inside them).  Nobody is left in NA to
# answer for the dead process (no kernel CM sends its DREQ), so the client
# must find out by itself, within BOUND seconds of the kill:
#  - cm_peer_stream: the server of an RC SEND stream is SIGKILLed; the
#    client must get an error completion (retry exceeded), then, as
#    applications do, rdma_disconnect and RDMA_CM_EVENT_DISCONNECTED
#    though its DREQ goes unanswered (the CM gives up on it, as the
#    kernel's CM does), and tear down without waiting for the peer;
#  - the same, but the client disconnects right after the kill, while
#    its QP has not yet noticed anything: its DREQ goes unanswered;
#  - the same with the dead host quiet (nft drops its 4791 input, so no
#    ICMP): the DREQ is retried until the CM gives up, then DISCONNECTED;
#  - rping: the server is SIGKILLed mid-run; the client, which mostly
#    waits for the server's next SEND with nothing outstanding to time
#    out, must hear of it (DISCONNECT EVENT, or a completion error if a
#    SEND was in flight) and exit (rping exits 0 after a disconnect).
# Nobody at the dead host's port 4791 answers ICMP "port unreachable"
# to the CM's probes (cm/peer_probe.c), which ends the connection.
# Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
STREAM="$SRN_BUILD/tests/cm_peer_stream"
[ -x "$STREAM" ] || t_skip "tests/cm_peer_stream not built"
t_need rping nft
t_netns_up srnck 192.168.79
t_netns_devs ck
BOUND=30
SUBNET_A=192.168.79.1

# kill_in_ns NS NAME [SIG]: signal (KILL) the processes called NAME in
# namespace NS (all started by this test).
kill_in_ns() {
	local pid
	for pid in $(ip netns pids "$1"); do
		[ "$(cat /proc/$pid/comm 2>/dev/null)" = "$2" ] && kill -"${3:-KILL}" "$pid"
	done
}

# round NAME PROG "SERVER ARGS" "CLIENT ARGS" [AFTER [BEFORE]]: server in
# NA, client in NB (both with SOFTRNIC_LOG=debug, stderr in
# NAME.{server,client}.log); once the client has run for 2 s, the command
# BEFORE runs, the server is SIGKILLed, then the command AFTER runs.  R_CLI holds the
# client's status, R_MS the ms from the kill to its end; 1 if it was
# still running BOUND s after the kill (then killed).
round() {
	local name=$1 prog=$2 sargs=$3 cargs=$4 after=${5:-} before=${6:-} spid cpid t0
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA=$DA timeout -k 2 120 ip netns exec "$NA" \
		"$SOFTRNIC" run -- $prog $sargs >"$T_TMP/$name.server" 2>"$T_TMP/$name.server.log" &
	spid=$!
	sleep 0.5
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vB=$DB timeout -k 2 120 ip netns exec "$NB" \
		"$SOFTRNIC" run -- $prog $cargs >"$T_TMP/$name.client" 2>"$T_TMP/$name.client.log" &
	cpid=$!
	sleep 2
	[ -n "$before" ] && $before
	kill_in_ns "$NA" "$(basename "$prog" | cut -c1-15)"
	t0=$(date +%s%N)
	[ -n "$after" ] && $after
	wait $spid
	for _ in $(seq 1 $((BOUND * 10))); do
		kill -0 $cpid 2>/dev/null || break
		sleep 0.1
	done
	R_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
	if kill -0 $cpid 2>/dev/null; then
		kill_in_ns "$NB" "$(basename "$prog" | cut -c1-15)"
		wait $cpid
		R_CLI=hung
		return 1
	fi
	wait $cpid
	R_CLI=$?
	return 0
}

# show NAME: the client's output and the CM's lines of its log
show() {
	sed 's/^/    client | /' "$T_TMP/$1.client" | tail -8
	grep -h "cm\[\|error completion\|timeout" "$T_TMP/$1.client.log" | sed 's/^/    log | /' | tail -8
}

port=$(t_port)
if ! round stream "$STREAM" "-s -a $SUBNET_A -p $port" "-c -a $SUBNET_A -p $port"; then
	t_fail "cm_peer_stream: client still running $BOUND s after the server was killed"
	show stream
elif [ "$R_CLI" -eq 0 ] && grep -q "^client: error completion" "$T_TMP/stream.client" &&
     grep -q "^client: DISCONNECTED" "$T_TMP/stream.client" &&
     grep -q "^client: torn down" "$T_TMP/stream.client"; then
	t_pass "cm_peer_stream: $(sed -n 's/^client: \(error completion [^(]*\).*/\1/p' "$T_TMP/stream.client"| head -1)then $(sed -n 's/^client: //p' "$T_TMP/stream.client" | grep DISCONNECTED); done $R_MS ms after the kill"
else
	t_fail "cm_peer_stream: client exit $R_CLI ($R_MS ms after the kill)"
	show stream
fi

# The client disconnects right after the kill, before the probes have
# told: its DREQ goes unanswered, and the dead host's ICMP answer to it
# must complete the disconnect at once (not after 16 retries).
disconnect_now() { kill_in_ns "$NB" cm_peer_stream USR1; }
port=$(t_port)
if ! round dreq "$STREAM" "-s -a $SUBNET_A -p $port" "-c -a $SUBNET_A -p $port" disconnect_now; then
	t_fail "unanswered DREQ: client still running $BOUND s after the server was killed"
	show dreq
elif [ "$R_CLI" -eq 0 ] && grep -q "^client: SIGUSR1" "$T_TMP/dreq.client" &&
     grep -q "DREQ to .*port unreachable" "$T_TMP/dreq.client.log" &&
     grep -q "^client: torn down" "$T_TMP/dreq.client"; then
	t_pass "unanswered DREQ: $(sed -n 's/^client: //p' "$T_TMP/dreq.client" | grep DISCONNECTED) (port unreachable); done $R_MS ms after the kill"
else
	t_fail "unanswered DREQ: client exit $R_CLI ($R_MS ms after the kill)"
	show dreq
fi

# Then the dead host keeps quiet (nft drops what comes to 4791: no ICMP):
# the DREQ is sent every second until the CM's retries run out (16), and
# DISCONNECTED must come then, as the kernel's CM gives up on a DREQ.
quiet() {
	ip netns exec "$NA" nft -f - <<-EOF
	table inet ck {
		chain input { type filter hook input priority 0; udp dport 4791 drop; }
	}
	EOF
}
port=$(t_port)
if ! round quiet "$STREAM" "-s -a $SUBNET_A -p $port" "-c -a $SUBNET_A -p $port" disconnect_now quiet; then
	t_fail "DREQ to a quiet host: client still running $BOUND s after the server was killed"
	show quiet
elif [ "$R_CLI" -eq 0 ] && grep -q "^client: SIGUSR1" "$T_TMP/quiet.client" &&
     [ "$(grep -c 'tx DREQ' "$T_TMP/quiet.client.log")" -ge 2 ] &&
     grep -q "^client: torn down" "$T_TMP/quiet.client"; then
	t_pass "DREQ to a quiet host: sent $(grep -c 'tx DREQ' "$T_TMP/quiet.client.log") times, then $(sed -n 's/^client: //p' "$T_TMP/quiet.client" | grep DISCONNECTED); done $R_MS ms after the kill"
else
	t_fail "DREQ to a quiet host: client exit $R_CLI ($R_MS ms after the kill)"
	show quiet
fi
ip netns exec "$NA" nft delete table inet ck 2>/dev/null

port=$(t_port)
if ! round rping rping "-s -a $SUBNET_A -p $port -C 100000000 -S 64" \
	"-c -a $SUBNET_A -p $port -C 100000000 -S 64"; then
	t_fail "rping: client still running $BOUND s after the server was killed"
	show rping
elif [ "$R_CLI" -ne 124 ] && [ "$R_CLI" -ne 137 ] &&
     grep -q "completion failed\|DISCONNECT EVENT" "$T_TMP"/rping.client*; then
	t_pass "rping: client exit $R_CLI ($(grep -h 'completion failed\|DISCONNECT\|peer gone' "$T_TMP"/rping.client* | sed 's/.*: //' | tr '\n' ' ')), $R_MS ms after the kill"
else
	t_fail "rping: client exit $R_CLI ($R_MS ms after the kill)"
	show rping
fi
t_done
