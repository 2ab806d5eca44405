#!/usr/bin/env bash
# rdma_cm between two "hosts": two network namespaces this test creates,
# joined by a veth pair whose addresses (192.168.79.0/24) exist only inside
# them.  The CM MADs then travel as RoCE does between hosts: to QP1 at UDP
# port 4791, which belongs to each side's verbs engine, and the engine
# hands them to the CM agent they belong to (transport/gsi_forward.h): the
# REQ to the listener's agent, REP/RTU/DREQ/DREP by the comm id they name.
# Debian's rping (data verified) and ucmatose (4 connections) run across.
# Root only; skips (77) without root or `ip netns`.  The host's own
# interfaces are never touched; a trap removes both namespaces.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need rping
t_netns_up srncm 192.168.79

if t_ns_pair rping 60 "rping -s -a 192.168.79.1 -C 10 -v -V" \
	"rping -c -a 192.168.79.1 -C 10 -v -V" &&
   [ "$(grep -c 'ping data: rdma-ping-' "$T_TMP/rping.client")" -eq 10 ]; then
	t_pass "rping -C 10 -v -V between namespaces (10 pings verified)"
else
	t_fail "rping -C 10 -v -V between namespaces"
fi
if grep -q "CM MAD 0x10 from 192.168.79.2:[0-9]* handed to agent port" "$T_TMP/rping.server.log"; then
	t_pass "the server's engine handed the REQ from 192.168.79.2 to its CM agent"
else
	t_fail "the server's engine handed the REQ from 192.168.79.2 to its CM agent"
fi

# Several connections at once: each REP/RTU/DREQ finds its id by comm id.
if t_ns_pair ucma 60 "ucmatose -b 192.168.79.1 -c 4 -C 10" "ucmatose -s 192.168.79.1 -c 4 -C 10" &&
   grep -q "test complete" "$T_TMP/ucma.client" && ! grep -qi "error\|fail" "$T_TMP/ucma.client"; then
	t_pass "ucmatose -c 4 -C 10 between namespaces"
else
	t_fail "ucmatose -c 4 -C 10 between namespaces"
fi
# perftest -R opens its own device context beside librdmacm's: two engines
# in the server process, and only one holds port 4791.  Data for the
# other's QP reaches 4791 and is handed over through its shared-memory
# inbox (transport/qp_forward.c).
# perftest -R connects twice to the same port; now and then (about 1 run
# in 10 here, with this code and with earlier rounds') its second REQ
# arrives while the server has no listener on the port: the server's CM
# answers REJ "invalid service ID", as Linux does, and the client dies in
# perftest's error path.  That race is perftest's own timing between the
# two connections: one more pair is tried when the server says so.
wbw_ok() {
	t_ns_pair "$1" 60 "ib_write_bw -R -d srn_vA -x 0 -F -s 65536 -n 200" \
		"ib_write_bw -R -d srn_vB -x 0 -F -s 65536 -n 200 192.168.79.1" &&
		grep -qE '^ +65536 +200 ' "$T_TMP/$1.client"
}
if wbw_ok wbw; then
	t_pass "ib_write_bw -R 64 KiB x 200 between namespaces"
elif grep -qs 'no listener' "$T_TMP/wbw.server" "$T_TMP/wbw.server.log" && wbw_ok wbw2; then
	t_pass "ib_write_bw -R 64 KiB x 200 between namespaces (second try: the first" \
	       "met perftest's listener race)"
else
	t_fail "ib_write_bw -R between namespaces"
fi
t_done
