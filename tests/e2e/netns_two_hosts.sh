#!/usr/bin/env bash
# Two "hosts" on one machine: two network namespaces this test creates,
# joined by a veth pair whose addresses (192.168.77.0/24) exist only inside
# them.  Debian's ibv_rc_pingpong -c and ib_write_bw run between them over
# softrnic, i.e. over the real UDP port-4791 path between two stacks; then
# again with netem loss/duplication/reordering on both veth ends.
# Root only; skips (77) without root or `ip netns`.  The host's own
# interfaces are never touched; a trap removes both namespaces.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need ibv_rc_pingpong
t_netns_up srncov 192.168.77

# Which device softrnic makes of each veth end.
devs_a=$(SOFTRNIC_DEVICES=vA timeout 10 ip netns exec "$NA" "$SOFTRNIC" devices 2>&1)
echo "$devs_a" | sed 's/^/  ns A: /'
echo "$devs_a" | grep -q srn_vA && t_pass "softrnic devices in ns A lists srn_vA" ||
	t_fail "softrnic devices in ns A lists srn_vA"

round() { # label
	local label=$1 port
	port=$(t_port)
	if t_ns_pair "pp$port" 60 "ibv_rc_pingpong -d srn_vA -g 0 -p $port -c -n 500 -s 4096" \
		"ibv_rc_pingpong -d srn_vB -g 0 -p $port -c -n 500 -s 4096 192.168.77.1" &&
	   grep -q "bytes in .* seconds" "$T_TMP/pp$port.client"; then
		t_pass "$label: ibv_rc_pingpong -c between namespaces: $(grep 'bytes in' "$T_TMP/pp$port.client")"
	else
		t_fail "$label: ibv_rc_pingpong -c between namespaces"
	fi
	if command -v ib_write_bw >/dev/null; then
		port=$(t_port)
		if t_ns_pair "bw$port" 120 "ib_write_bw -d srn_vA -x 0 -F -p $port -s 65536 -n 200" \
			"ib_write_bw -d srn_vB -x 0 -F -p $port -s 65536 -n 200 192.168.77.1" &&
		   grep -qE '^ +[0-9]+ +[0-9]+ ' "$T_TMP/bw$port.client"; then
			t_pass "$label: ib_write_bw between namespaces: $(grep -E '^ +[0-9]+ +[0-9]+ ' "$T_TMP/bw$port.client" | tail -1)"
		else
			t_fail "$label: ib_write_bw between namespaces"
		fi
	fi
}

round "clean link"

if ip netns exec "$NA" tc qdisc add dev vA root netem loss 1% duplicate 1% reorder 5% delay 1ms 2>/dev/null &&
   ip netns exec "$NB" tc qdisc add dev vB root netem loss 1% duplicate 1% reorder 5% delay 1ms 2>/dev/null; then
	round "netem loss 1% dup 1% reorder 5%"
else
	echo "  (tc netem unavailable: lossy round skipped)"
fi
t_done
