#!/usr/bin/env bash
# RoCEv2 over IPv6 between two "hosts": the namespaces of tests/lib/netns.sh
# with ULA addresses fd00:77::1 (vA) and fd00:77::2 (vB) added inside them
# (nodad: usable at once).  Each device must list its address as a RoCE v2
# GID; ibv_rc_pingpong and ib_write_bw with that GID index must exchange
# data over UDP/IPv6 port 4791 between the two stacks.  Root only; skips
# (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need ibv_rc_pingpong ibv_devinfo
t_netns_up srnv6 192.168.78
t_netns_devs v6
ip -n "$NA" addr add fd00:77::1/64 dev vA nodad || t_skip "no IPv6 in the namespaces"
ip -n "$NB" addr add fd00:77::2/64 dev vB nodad || t_skip "no IPv6 in the namespaces"

gid_index() { # ns dev iface addr: the GID index of addr on the device
	SOFTRNIC_DEVICES="$3" timeout 10 ip netns exec "$1" "$SOFTRNIC" run -- \
		ibv_devinfo -v -d "$2" 2>/dev/null |
		sed -n "s/.*GID\[ *\([0-9]*\)\]:[[:space:]]*$4, RoCE v2.*/\1/p" | head -1
}
SOFTRNIC_DEVICES=vA timeout 10 ip netns exec "$NA" "$SOFTRNIC" run -- ibv_devinfo -v 2>&1 |
	grep GID | sed 's/^/  ns A: /'
ga=$(gid_index "$NA" srn_vA vA fd00:77::1)
gb=$(gid_index "$NB" srn_vB vB fd00:77::2)
if [ -n "$ga" ] && [ -n "$gb" ]; then
	t_pass "fd00:77::1 is GID $ga of srn_vA, fd00:77::2 GID $gb of srn_vB"
else
	t_fail "no ULA GID listed (A: '$ga', B: '$gb')"
	t_done
fi

port=$(t_port)
if t_ns_pair "pp$port" 60 "ibv_rc_pingpong -d srn_vA -g $ga -p $port -n 500 -s 4096" \
	"ibv_rc_pingpong -d srn_vB -g $gb -p $port -n 500 -s 4096 192.168.78.1" &&
   grep -q "GID fd00:77::1" "$T_TMP/pp$port.client" &&
   grep -q "bytes in .* seconds" "$T_TMP/pp$port.client"; then
	t_pass "ibv_rc_pingpong over IPv6 between namespaces: $(grep 'bytes in' "$T_TMP/pp$port.client")"
else
	t_fail "ibv_rc_pingpong over IPv6 between namespaces"
fi
if command -v ib_write_bw >/dev/null; then
	port=$(t_port)
	if t_ns_pair "bw$port" 120 "ib_write_bw -d srn_vA -x $ga -F -p $port -s 65536 -n 200" \
		"ib_write_bw -d srn_vB -x $gb -F -p $port -s 65536 -n 200 192.168.78.1" &&
	   grep -qE '^ +[0-9]+ +[0-9]+ ' "$T_TMP/bw$port.client"; then
		t_pass "ib_write_bw -x $gb over IPv6 between namespaces: $(grep -E '^ +[0-9]+ +[0-9]+ ' "$T_TMP/bw$port.client" | tail -1)"
	else
		t_fail "ib_write_bw over IPv6 between namespaces"
	fi
fi

# Two processes per namespace at once: [IPv6]:4791 has one holder per
# address (no steering group), which hands the other process's packets
# on through its inbox (transport/qp_forward.c), and when it goes the
# other binds the port (engine.c, roce6_retry).  Both pairs must pass,
# and a server must have held the port.
p1=$(t_port); p2=$((p1 + 1))
t_ns_pair "two1" 60 "ibv_rc_pingpong -d srn_vA -g $ga -p $p1 -n 300 -s 4096" \
	"ibv_rc_pingpong -d srn_vB -g $gb -p $p1 -n 300 -s 4096 192.168.78.1" >/dev/null &
j1=$!
t_ns_pair "two2" 60 "ibv_rc_pingpong -d srn_vA -g $ga -p $p2 -n 300 -s 4096" \
	"ibv_rc_pingpong -d srn_vB -g $gb -p $p2 -n 300 -s 4096 192.168.78.1" >/dev/null &
j2=$!
wait $j1; r1=$?
wait $j2; r2=$?
holders=$(cat "$T_TMP/two1.server.log" "$T_TMP/two2.server.log" | grep -c "IPv6 UDP port 4791 taken")
fwd=$(cat "$T_TMP/two1.server.log" "$T_TMP/two2.server.log" | sed -n 's/.*rx_forwarded \([0-9]*\).*/\1/p' | head -1)
if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ "$holders" -ge 1 ] &&
   grep -q "bytes in" "$T_TMP/two1.client" && grep -q "bytes in" "$T_TMP/two2.client"; then
	t_pass "two pingpong pairs at once over IPv6 ($holders takes of 4791 in ns A, ${fwd:-0} packets handed on): $(grep 'bytes in' "$T_TMP/two2.client")"
else
	t_fail "two pairs at once over IPv6 (exits $r1 $r2, holders $holders)"
	tail -5 "$T_TMP/two1.server" "$T_TMP/two2.server" "$T_TMP/two1.client" "$T_TMP/two2.client"
fi
t_done
