#!/usr/bin/env bash
# rdma_cm over UD, Debian's unmodified programs: udaddy (RDMA_PS_UDP ids
# resolve each other with SIDR_REQ/SIDR_REP on QP1, then exchange UD
# sends) and mckey (rdma_join_multicast: a receiver and a sender join an
# IPv4 group, mapped to the GID ::ffff:a.b.c.d, and the sender's UD
# datagrams to QPN 0xFFFFFF reach the receiver).
. "$(dirname "$0")/../lib/e2e.sh"
t_need udaddy mckey stdbuf

# udaddy has no port option: it always uses 7174.
if t_pair "udaddy" 20 "stdbuf -oL udaddy" "stdbuf -oL udaddy -s 127.0.0.1" &&
   grep -q "data transfers complete" "$T_TMP/udaddy.client" &&
   grep -q "data transfers complete" "$T_TMP/udaddy.server"; then
	t_pass "udaddy: SIDR resolution and UD data transfers, both exit 0"
else
	t_fail "udaddy"
fi

# mckey: the receiver must have joined before the sender sends (no
# reliability on UD): start it, wait for its "receiving" line.
mckey_pair() { # label, group, extra args for both
	local label=$1 grp=$2; shift 2
	local r=$T_TMP/mckey$grp.recv s=$T_TMP/mckey$grp.send rpid rc_r rc_s
	timeout -k 2 20 "$SOFTRNIC" run -- stdbuf -oL mckey -m "$grp" -b 127.0.0.1 "$@" >"$r" 2>&1 &
	rpid=$!
	for _ in $(seq 100); do
		grep -q "receiving data transfers" "$r" 2>/dev/null && break
		sleep 0.05
	done
	timeout -k 2 20 "$SOFTRNIC" run -- stdbuf -oL mckey -m "$grp" -b 127.0.0.1 -s "$@" >"$s" 2>&1
	rc_s=$?
	wait $rpid
	rc_r=$?
	if [ $rc_s -eq 0 ] && [ $rc_r -eq 0 ] && grep -q "data transfers complete" "$r" &&
	   grep -q "joined dgid: ::ffff:$grp" "$r"; then
		t_pass "mckey $label: receiver got every datagram ($(grep -c . "$r") lines), both exit 0"
	else
		echo "  receiver exit $rc_r:"; sed 's/^/    | /' "$r" | tail -8
		echo "  sender exit $rc_s:"; sed 's/^/    | /' "$s" | tail -8
		t_fail "mckey $label"
	fi
}
mckey_pair "default" 239.7.$((RANDOM % 250)).1
mckey_pair "-C 50 -S 1000" 239.8.$((RANDOM % 250)).1 -C 50 -S 1000
mckey_pair "-c 2 (two ids per side)" 239.9.$((RANDOM % 250)).1 -c 2 -C 20
t_done
