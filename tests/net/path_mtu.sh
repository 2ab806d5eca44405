#!/usr/bin/env bash
# A path MTU above the port's active MTU is refused at ibv_modify_qp
# (EINVAL), as RoCE NICs refuse it, instead of being accepted and the QP
# hanging: two network namespaces this test creates, joined by a veth pair
# of MTU 1500 (192.168.79.0/24, addresses only inside them), where the
# active MTU is 1024.  ibv_rc_pingpong -m 4096 must fail at once on both
# sides; -m 1024 must work.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need ibv_rc_pingpong ibv_devinfo
t_netns_up srnmt 192.168.79
t_netns_devs mt

mtu=$(SOFTRNIC_DEVICES=vA=$DA timeout 10 ip netns exec "$NA" "$SOFTRNIC" run -- ibv_devinfo -d $DA |
	awk '/active_mtu/ {print $2; exit}')
[ "$mtu" = "1024" ] && t_pass "veth MTU 1500: active_mtu 1024" ||
	t_fail "veth MTU 1500: active_mtu '$mtu', expected 1024"

pp() { # NAME SECS MTU: server in NA, client in NB
	local port
	port=$(t_port)
	SOFTRNIC_DEVICES=vA=$DA timeout -k 2 "$2" ip netns exec "$NA" "$SOFTRNIC" run -- \
		ibv_rc_pingpong -d $DA -g 0 -p $port -m "$3" -n 100 >"$T_TMP/$1.server" 2>&1 &
	local spid=$!
	sleep 0.5
	SOFTRNIC_DEVICES=vB=$DB timeout -k 2 "$2" ip netns exec "$NB" "$SOFTRNIC" run -- \
		ibv_rc_pingpong -d $DB -g 0 -p $port -m "$3" -n 100 192.168.79.1 \
		>"$T_TMP/$1.client" 2>&1
	CLI=$?
	wait $spid
	SRV=$?
}

pp big 30 4096
if [ $CLI -ne 0 ] && [ $CLI -ne 124 ] && [ $SRV -ne 0 ] && [ $SRV -ne 124 ] &&
   cat "$T_TMP/big.client" "$T_TMP/big.server" | grep -q "Failed to modify QP to RTR"; then
	t_pass "-m 4096 over a 1500-byte link: refused at modify to RTR (client exit $CLI, server exit $SRV)"
else
	t_fail "-m 4096 over a 1500-byte link: client exit $CLI, server exit $SRV"
	sed 's/^/    | /' "$T_TMP/big.client" "$T_TMP/big.server" | tail -10
fi
pp ok 60 1024
if [ $CLI -eq 0 ] && [ $SRV -eq 0 ]; then
	t_pass "-m 1024 over the same link: $(grep 'bytes in' "$T_TMP/ok.client")"
else
	t_fail "-m 1024 over the same link: client exit $CLI, server exit $SRV"
	sed 's/^/    | /' "$T_TMP/ok.client" | tail -10
fi
t_done
