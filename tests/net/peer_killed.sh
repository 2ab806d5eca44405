#!/usr/bin/env bash
# A server that dies does not hang its client across hosts: two network
# namespaces this test creates, joined by a veth pair (192.168.78.0/24,
# addresses only inside them).  The server (ib_write_bw, then ib_send_bw)
# is SIGKILLed mid-run; the client, with the retry_cnt 7 and timeout 14
# perftest sets, must get an error completion (transport retry counter
# exceeded) and exit non-zero within a bound (30 s: a NIC gives up after
# ~0.5 s).  (A ping-pong whose last SEND was acknowledged before the kill
# waits for the answer for ever, as on hardware: nothing is outstanding
# to time out.)  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need ib_write_bw ib_send_bw
t_netns_up srnpk 192.168.78
BOUND=30
t_netns_devs pk

# kill_in_ns NS NAME: SIGKILL the processes called NAME in namespace NS
# (all started by this test).
kill_in_ns() {
	local pid
	for pid in $(ip netns pids "$1"); do
		[ "$(cat /proc/$pid/comm 2>/dev/null)" = "$2" ] && kill -KILL "$pid"
	done
}

# round LABEL PROG "SERVER ARGS" "CLIENT ARGS": server in NA, client in NB;
# the server is killed once the client has run for 2 s.
round() {
	local label=$1 prog=$2 sargs=$3 cargs=$4 spid cpid t0 t1 cli
	SOFTRNIC_DEVICES=vA=$DA timeout -k 2 120 ip netns exec "$NA" "$SOFTRNIC" run -- $prog $sargs \
		>"$T_TMP/$prog.server" 2>&1 &
	spid=$!
	sleep 0.5
	SOFTRNIC_DEVICES=vB=$DB timeout -k 2 120 ip netns exec "$NB" "$SOFTRNIC" run -- $prog $cargs \
		>"$T_TMP/$prog.client" 2>&1 &
	cpid=$!
	sleep 2
	if ! kill -0 $cpid 2>/dev/null; then
		t_fail "$label: client ended before the server was killed"
		sed 's/^/    | /' "$T_TMP/$prog.client" | tail -10
		wait $spid $cpid
		return
	fi
	kill_in_ns "$NA" "$prog"
	t0=$(date +%s%N)
	wait $spid
	# the client must be done within BOUND seconds of the kill
	for _ in $(seq 1 $((BOUND * 10))); do
		kill -0 $cpid 2>/dev/null || break
		sleep 0.1
	done
	t1=$(date +%s%N)
	if kill -0 $cpid 2>/dev/null; then
		t_fail "$label: client still running $BOUND s after the server was killed"
		kill_in_ns "$NB" "$prog"
		wait $cpid
		sed 's/^/    | /' "$T_TMP/$prog.client" | tail -10
		return
	fi
	wait $cpid
	cli=$?
	echo "  client: $(grep -im1 'status\|error\|fail' "$T_TMP/$prog.client")"
	if [ $cli -ne 0 ] && [ $cli -ne 124 ] && [ $cli -ne 137 ] &&
	   grep -qi "retry counter exceeded\|RETRY_EXC\|status 12\|(12)" "$T_TMP/$prog.client"; then
		t_pass "$label: client exit $cli after a retry-exceeded error, $(( (t1 - t0) / 1000000 )) ms after the kill"
	else
		t_fail "$label: client exit $cli"
		sed 's/^/    | /' "$T_TMP/$prog.client" | tail -10
	fi
}

for prog in ib_write_bw ib_send_bw; do
	port=$(t_port)
	round "$prog, server killed" $prog "-d $DA -x 0 -F -p $port -s 65536 -D 60" \
		"-d $DB -x 0 -F -p $port -s 65536 -D 60 192.168.78.1"
done
t_done
