#!/usr/bin/env bash
# RoCEv2 over IPv6 on srn_lo: GID 1 is ::1 (GID 0 stays the IPv4-mapped
# 127.0.0.1).  ibv_rc_pingpong -g 1, ibv_ud_pingpong -g 1 and ib_write_bw
# -x 1 must exchange data; on the UDP path (SOFTRNIC_TRANSPORT=udp) a
# capture must show every packet as IPv6 from ::1 to ::1 (the receiver
# checked each ICRC); mixing families (-g 1 on one side, -g 0 on the
# other) is refused at RTR.
. "$(dirname "$0")/../lib/perftest.sh"
t_need ibv_rc_pingpong ibv_ud_pingpong ibv_devinfo python3

gids=$("$SOFTRNIC" run -- ibv_devinfo -v -d srn_lo 2>&1 | grep -E 'GID\[ *[01]\]')
if echo "$gids" | grep -qE 'GID\[ *0\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2' &&
   echo "$gids" | grep -qE 'GID\[ *1\]:[[:space:]]+::1, RoCE v2'; then
	t_pass "srn_lo GIDs: $(echo $gids)"
else
	t_fail "srn_lo GID 0/1 are not 127.0.0.1 / ::1: $gids"
fi

pp() { # label, extra args
	local label=$1; shift
	local port; port=$(t_port)
	if t_pair "pp$port" 60 "ibv_rc_pingpong -d srn_lo -g 1 -p $port $*" \
		"ibv_rc_pingpong -d srn_lo -g 1 -p $port $* 127.0.0.1" &&
	   grep -q "GID ::1" "$T_TMP/pp$port.client" &&
	   grep -q "bytes in .* seconds" "$T_TMP/pp$port.client" &&
	   grep -q "iters in .* seconds" "$T_TMP/pp$port.server"; then
		t_pass "ibv_rc_pingpong -g 1 $label: $(grep 'bytes in' "$T_TMP/pp$port.client")"
	else
		t_fail "ibv_rc_pingpong -g 1 $label"
	fi
}
pp default -n 500
pp "-s 65536 -m 4096" -s 65536 -m 4096 -n 100
pp "-e" -e -n 200

# UD: address handles with the IPv6 GID
port=$(t_port)
if t_pair "ud$port" 60 "ibv_ud_pingpong -d srn_lo -g 1 -p $port -n 300" \
	"ibv_ud_pingpong -d srn_lo -g 1 -p $port -n 300 127.0.0.1" &&
   grep -q "GID ::1" "$T_TMP/ud$port.client" &&
   grep -q "bytes in .* seconds" "$T_TMP/ud$port.client"; then
	t_pass "ibv_ud_pingpong -g 1: $(grep 'bytes in' "$T_TMP/ud$port.client")"
else
	t_fail "ibv_ud_pingpong -g 1"
fi

PERFTEST_GID=1 PERFTEST_SECS=120 perftest_one ib_write_bw "-x 1 -s 65536" -s 65536 -n 200

# The wire: what the server sends and receives over UDP, captured, is
# IPv6 from ::1 to ::1 and nothing else.
if [ "${SOFTRNIC_TRANSPORT:-}" = udp ]; then
	port=$(t_port)
	SOFTRNIC_PCAP=$T_TMP/v6.pcap timeout -k 2 60 "$SOFTRNIC" run -- \
		ibv_rc_pingpong -d srn_lo -g 1 -p "$port" -n 50 -s 3000 -m 1024 >"$T_TMP/cap.server" 2>&1 &
	spid=$!
	sleep "$T_START_WAIT"
	timeout -k 2 60 "$SOFTRNIC" run -- ibv_rc_pingpong -d srn_lo -g 1 -p "$port" -n 50 \
		-s 3000 -m 1024 127.0.0.1 >"$T_TMP/cap.client" 2>&1
	cli=$?
	wait $spid
	srv=$?
	counts=$(python3 "$SRN_SOURCE/tests/lib/pcap_families.py" "$T_TMP/v6.pcap" 2>&1)
	v6=$(echo "$counts" | sed -n 's/.*loop6=\([0-9]*\).*/\1/p')
	v4=$(echo "$counts" | sed -n 's/.*ipv4=\([0-9]*\).*/\1/p')
	# 50 round trips of 3 packets each way, plus ACKs
	if [ $srv -eq 0 ] && [ $cli -eq 0 ] && [ "${v6:-0}" -ge 300 ] && [ "${v4:-1}" -eq 0 ]; then
		t_pass "capture of the server: $counts"
	else
		t_fail "capture of -g 1 over UDP: $counts (server $srv client $cli)"
	fi
fi

# Families mixed: each side's path is refused at RTR, neither hangs.
port=$(t_port)
t_pair "mix" 20 "ibv_rc_pingpong -d srn_lo -g 1 -p $port" \
	"ibv_rc_pingpong -d srn_lo -g 0 -p $port 127.0.0.1" >/dev/null
if [ "$T_PAIR_SRV" -ne 0 ] && [ "$T_PAIR_CLI" -ne 0 ] && [ "$T_PAIR_SRV" -ne 124 ] &&
   [ "$T_PAIR_CLI" -ne 124 ] && grep -q "Failed to modify QP to RTR" "$T_TMP/mix.server" "$T_TMP/mix.client"; then
	t_pass "-g 1 against -g 0: refused at RTR on both sides"
else
	t_fail "-g 1 against -g 0 (server exit $T_PAIR_SRV, client exit $T_PAIR_CLI)"
fi
t_done
