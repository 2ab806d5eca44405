#!/usr/bin/env bash
# rdma_cm over IPv6 between two "hosts": the namespaces of tests/lib/netns.sh
# with ULA addresses fd00:79::1 (vA) and fd00:79::2 (vB) added inside them
# (nodad).  The CM MADs travel as RoCE's do over IPv6: to QP1 at
# [fd00:79::1]:4791, held by the server's verbs engine, which hands them to
# its CM agent (transport/gsi_forward.h, header version 2).  rping (-v -V,
# 10 pings verified), ucmatose (2 connections) and udaddy (UD) run across; then the
# refusals, each prompt: a host with softrnic but no rdma_cm process
# answers a REQ with REJ (invalid service id); a host where nobody holds
# port 4791 gets UNREACHABLE from ICMPv6 port unreachable; an address no
# host has gets UNREACHABLE from ICMPv6 address unreachable (neighbour
# discovery gives up after ~3 s).  perftest -R resolves its server as IPv4
# only (docs/ipv6.md) and is not run.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need rping ucmatose ibv_rc_pingpong
t_netns_up srncm6 192.168.85
t_netns_devs cm6
ip -n "$NA" addr add fd00:79::1/64 dev vA nodad || t_skip "no IPv6 in the namespaces"
ip -n "$NB" addr add fd00:79::2/64 dev vB nodad || t_skip "no IPv6 in the namespaces"

if t_ns_pair rping 60 "rping -s -a fd00:79::1 -C 10 -v -V" "rping -c -a fd00:79::1 -C 10 -v -V" &&
   [ "$(grep -c 'ping data: rdma-ping-' "$T_TMP/rping.client")" -eq 10 ]; then
	t_pass "rping -a fd00:79::1 -C 10 -v -V between namespaces (10 pings verified)"
else
	t_fail "rping -a fd00:79::1 between namespaces"
fi
if grep -q "CM MAD 0x10 from fd00:79::2:[0-9]* handed to agent port" "$T_TMP/rping.server.log"; then
	t_pass "the server's engine handed the REQ from fd00:79::2 to its CM agent"
else
	t_fail "no REQ from fd00:79::2 handed to the server's CM agent"
fi
if t_ns_pair ucma 60 "ucmatose -b fd00:79::1 -c 2 -C 10" "ucmatose -s fd00:79::1 -c 2 -C 10" &&
   grep -q "data transfers complete" "$T_TMP/ucma.client"; then
	t_pass "ucmatose -c 2 -C 10 over fd00:79::1 between namespaces"
else
	t_fail "ucmatose over fd00:79::1 between namespaces"
fi
# UD: address resolution by SIDR over IPv6, through the server's engine.
if t_ns_pair udaddy 60 "udaddy -b fd00:79::1" "udaddy -s fd00:79::1" &&
   grep -q "data transfers complete" "$T_TMP/udaddy.client"; then
	t_pass "udaddy -b/-s fd00:79::1 between namespaces (UD, SIDR over IPv6)"
else
	t_fail "udaddy over fd00:79::1 between namespaces"
fi

# rping_fails LABEL DST MAX_MS EVENT: a client in NB toward DST must fail
# with EVENT within MAX_MS.
rping_fails() {
	local t0 st ms
	t0=$(date +%s%N)
	SOFTRNIC_DEVICES=vB=$DB timeout -k 2 30 ip netns exec "$NB" "$SOFTRNIC" run -- \
		rping -c -a "$2" -p "$(t_port)" -C 1 -v >"$T_TMP/fail.out" 2>&1
	st=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	if [ $st -ne 0 ] && [ $st -ne 124 ] && [ $ms -lt "$3" ] && grep -q "$4" "$T_TMP/fail.out"; then
		t_pass "$1: $4 after $ms ms"
	else
		t_fail "$1: exit $st after $ms ms (wanted $4 within $3 ms)"
		sed 's/^/    | /' "$T_TMP/fail.out" | tail -5
	fi
}
rping_fails "fd00:79::1 with nobody at port 4791" fd00:79::1 2000 UNREACHABLE
rping_fails "fd00:79::9 (no such host)" fd00:79::9 8000 UNREACHABLE

# softrnic in NA (an ibv_rc_pingpong server holds port 4791) but no
# rdma_cm process: its engine refuses the REQ itself.
SOFTRNIC_DEVICES=vA=$DA timeout -k 2 60 ip netns exec "$NA" "$SOFTRNIC" run -- \
	ibv_rc_pingpong -d "$DA" -g 0 -p "$(t_port)" >"$T_TMP/anchor" 2>&1 &
anchor=$!
sleep 0.5
rping_fails "fd00:79::1 with softrnic but no rdma_cm there" fd00:79::1 5000 REJECTED
kill $anchor 2>/dev/null
wait $anchor 2>/dev/null
t_done
