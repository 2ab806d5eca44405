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
[ "$(id -u)" -eq 0 ] || t_skip "needs root for ip netns"
t_need ip timeout rping
ip netns list >/dev/null 2>&1 || t_skip "ip netns not usable"

NA="srncmA$$"; NB="srncmB$$"
cleanup() {
	ip netns del "$NA" 2>/dev/null
	ip netns del "$NB" 2>/dev/null
	rm -rf "$T_TMP"
}
trap cleanup EXIT

ip netns add "$NA" && ip netns add "$NB" || t_skip "cannot create namespaces"
ip -n "$NA" link add vA type veth peer name vB netns "$NB" || t_skip "no veth support"
ip -n "$NA" addr add 192.168.79.1/24 dev vA
ip -n "$NB" addr add 192.168.79.2/24 dev vB
for n in "$NA" "$NB"; do ip -n "$n" link set lo up; done
ip -n "$NA" link set vA up
ip -n "$NB" link set vB up

# ns_pair NAME SECS "SERVER CMD" "CLIENT CMD": server in NA (its stderr,
# with SOFTRNIC_LOG=debug, apart in NAME.server.log), client in NB.
ns_pair() {
	local name=$1 secs=$2 scmd=$3 ccmd=$4 spid srv cli
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA timeout -k 2 "$secs" \
		ip netns exec "$NA" "$SOFTRNIC" run -- $scmd \
		>"$T_TMP/$name.server" 2>"$T_TMP/$name.server.log" &
	spid=$!
	sleep 0.5
	SOFTRNIC_DEVICES=vB timeout -k 2 "$secs" ip netns exec "$NB" "$SOFTRNIC" run -- $ccmd \
		>"$T_TMP/$name.client" 2>&1
	cli=$?
	wait $spid
	srv=$?
	if [ $srv -ne 0 ] || [ $cli -ne 0 ]; then
		echo "  server ($scmd) exit $srv:"; sed 's/^/    | /' "$T_TMP/$name.server" | tail -15
		grep -i "cm\b\|CM MAD\|drop" "$T_TMP/$name.server.log" | sed 's/^/    | /' | tail -10
		echo "  client ($ccmd) exit $cli:"; sed 's/^/    | /' "$T_TMP/$name.client" | tail -15
		return 1
	fi
	return 0
}

if ns_pair rping 60 "rping -s -a 192.168.79.1 -C 10 -v -V" \
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
if ns_pair ucma 60 "ucmatose -b 192.168.79.1 -c 4 -C 10" "ucmatose -s 192.168.79.1 -c 4 -C 10" &&
   grep -q "test complete" "$T_TMP/ucma.client" && ! grep -qi "error\|fail" "$T_TMP/ucma.client"; then
	t_pass "ucmatose -c 4 -C 10 between namespaces"
else
	t_fail "ucmatose -c 4 -C 10 between namespaces"
fi
# perftest -R opens its own device context beside librdmacm's: two engines
# in the server process, and only one holds port 4791.  Data for the
# other's QP reaches 4791 and is handed over through its shared-memory
# inbox (transport/qp_forward.c).
if ns_pair wbw 60 "ib_write_bw -R -d srn_vA -x 0 -F -s 65536 -n 200" \
	"ib_write_bw -R -d srn_vB -x 0 -F -s 65536 -n 200 192.168.79.1" &&
   grep -qE '^ +65536 +200 ' "$T_TMP/wbw.client"; then
	t_pass "ib_write_bw -R 64 KiB x 200 between namespaces"
else
	t_fail "ib_write_bw -R between namespaces"
fi
t_done
