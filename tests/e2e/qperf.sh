#!/usr/bin/env bash
# qperf (Debian's, unmodified) over rdma_cm (-cm1): its nine RC tests, each
# a server and a client process of its own for one second (-t 1), each
# required to exit 0 on both sides and print its result line.  qperf waits
# in ibv_get_cq_event and ends a test with SIGALRM, so a lost test ("failed
# to receive results: timed out") means a side never left that wait.
# Then qperf's default without -cm1: it connects the QP itself with no GRH,
# which a RoCE device refuses (EINVAL at RTR), and must say so and exit,
# not hang.
. "$(dirname "$0")/../lib/e2e.sh"
t_need qperf

QPERF_TESTS="rc_bw:bw rc_bi_bw:bw rc_rdma_write_bw:bw rc_rdma_read_bw:bw
rc_lat:latency rc_rdma_write_lat:latency rc_rdma_read_lat:latency
rc_compare_swap_mr:msg_rate rc_fetch_add_mr:msg_rate"

for t in $QPERF_TESTS; do
	name=${t%%:*} what=${t#*:}
	port=$(t_port)
	if t_pair "$name" 30 "qperf -lp $port" "qperf -lp $port -t 1 -cm1 127.0.0.1 $name quit"; then
		line=$(grep -E "^ *$what +=  *[0-9]" "$T_TMP/$name.client" | head -1 | tr -s ' ' | sed 's/^ //')
		if [ -n "$line" ]; then
			t_pass "$name -cm1: $line"
		else
			t_fail "$name -cm1: no '$what = ' line"
			sed 's/^/    | /' "$T_TMP/$name.client"
		fi
	else
		t_fail "$name -cm1: server exit $T_PAIR_SRV, client exit $T_PAIR_CLI"
	fi
done

# Without -cm1: a clean refusal.  The server outlives the client (it
# waits for the next one): ended here and reaped.
port=$(t_port)
timeout -k 2 30 "$SOFTRNIC" run -- qperf -lp "$port" >"$T_TMP/nocm.server" 2>&1 &
spid=$!
sleep 0.3
timeout -k 2 20 "$SOFTRNIC" run -- qperf -lp "$port" -t 1 127.0.0.1 rc_lat >"$T_TMP/nocm.client" 2>&1
cli=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
if [ "$cli" -ne 0 ] && [ "$cli" -ne 124 ] && [ "$cli" -ne 137 ] &&
	grep -q "failed to modify QP to RTR" "$T_TMP/nocm.client"; then
	t_pass "rc_lat without -cm1 (no GRH): refused at RTR, exit $cli"
else
	t_fail "rc_lat without -cm1: exit $cli, wanted a prompt 'failed to modify QP to RTR'"
	sed 's/^/    | /' "$T_TMP/nocm.client"
fi
t_done
