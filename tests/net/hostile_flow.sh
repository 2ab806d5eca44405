#!/usr/bin/env bash
# Hostile datagrams during a real transfer between two hosts: two network
# namespaces this test creates, joined by a veth pair (192.168.83.0/24,
# addresses only inside them).  ibv_rc_pingpong -c (every byte checked)
# runs from NB to NA while tests/hostile_send, also in NB, sends NA's
# port 4791 ~5000 datagrams a second: garbage, truncated headers, bad
# ICRCs, and valid-ICRC WRITEs, SENDs, READ responses and random opcodes
# forged for the server's QPN with random PSNs and rkeys, and for random
# QPNs.  The transfer must complete with its data intact, and the server's
# counters must show the drops.  Canary checks of memory outside the MRs
# are the unit test's (test_wire_hostile); here it is the live flow.
# Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need ibv_rc_pingpong
HOSTILE="$SRN_BUILD/tests/hostile_send"
[ -x "$HOSTILE" ] || t_skip "tests/hostile_send not built"
t_netns_up srnhf 192.168.83
t_netns_devs hf
port=$(t_port)

SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA=$DA timeout -k 2 120 ip netns exec "$NA" "$SOFTRNIC" run -- \
	ibv_rc_pingpong -g 0 -c -s 16384 -n 200000 -d "$DA" -p "$port" \
	>"$T_TMP/server" 2>"$T_TMP/server.log" &
spid=$!
sleep 0.5
SOFTRNIC_DEVICES=vB=$DB timeout -k 2 120 ip netns exec "$NB" "$SOFTRNIC" run -- \
	ibv_rc_pingpong -g 0 -c -s 16384 -n 200000 -d "$DB" -p "$port" 192.168.83.1 \
	>"$T_TMP/client" 2>&1 &
cpid=$!
# the server's QPN once it is connected, from its debug log on stderr
# ("qp N (STATE) psn P: RTR -> RTS"; stdout is buffered until exit)
qpn=
for _ in $(seq 100); do
	qpn=$(sed -n 's/.*: qp \([0-9]*\) ([A-Z]*) psn [0-9]*: RTR -> RTS.*/\1/p' "$T_TMP/server.log" | head -1)
	[ -n "$qpn" ] && break
	sleep 0.05
done
if [ -n "$qpn" ]; then
	timeout -k 2 30 ip netns exec "$NB" "$HOSTILE" 192.168.83.1 "$qpn" 3 >"$T_TMP/hostile" 2>&1
	hrc=$?
	# the whole attack must have met the transfer
	kill -0 $cpid 2>/dev/null || { hrc=3; echo "(the transfer ended first)" >>"$T_TMP/hostile"; }
else
	hrc=1
fi
wait $cpid; cli=$?
wait $spid; srv=$?

[ -n "$qpn" ] && [ $hrc -eq 0 ] && t_pass "hostile datagrams sent to QPN $qpn: $(cat "$T_TMP/hostile")" ||
	t_fail "hostile sender (QPN '${qpn}', exit $hrc): $(cat "$T_TMP/hostile" 2>/dev/null)"
if [ $srv -eq 0 ] && [ $cli -eq 0 ]; then
	t_pass "ibv_rc_pingpong -c 200000 x 16 KiB completed intact under fire: $(grep -o '[0-9.]* Mbit/sec' "$T_TMP/client")"
else
	t_fail "ibv_rc_pingpong under fire (server exit $srv, client exit $cli)"
	sed 's/^/    server | /' "$T_TMP/server" | tail -5
	sed 's/^/    client | /' "$T_TMP/client" | tail -5
fi
# Every kind left a trace in the counters (printed at device close).
counters=$(grep -Eo '(rx_drop_[a-z_]+|resp_[a-z_]+|comp_[a-z_]+) [0-9]+' "$T_TMP/server.log" | tr '\n' ' ')
for c in rx_drop_icrc rx_drop_decode rx_drop_no_qp; do
	case " $counters" in
	*" $c "[1-9]*) ;;
	*) t_fail "server counter $c is not above 0 (counters: $counters)" ;;
	esac
done
t_pass "server counters: $counters"
t_done
