#!/usr/bin/env bash
# Debian's unmodified ibv_uc_pingpong: Unreliable Connected (multi-packet messages without ACKs).
# Server and client as two processes on srn_lo through `softrnic run`:
# each configuration must exit 0 on both sides and report the exchange.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_uc_pingpong

run() { # label, extra args
	local label=$1; shift
	local port; port=$(t_port)
	if t_pair "ucpp$port" 60 "ibv_uc_pingpong -d srn_lo -g 0 -p $port $*" \
		"ibv_uc_pingpong -d srn_lo -g 0 -p $port $* 127.0.0.1" &&
	   grep -q "bytes in .* seconds" "$T_TMP/ucpp$port.client" &&
	   grep -q "iters in .* seconds" "$T_TMP/ucpp$port.server"; then
		t_pass "ibv_uc_pingpong $label: $(grep 'bytes in' "$T_TMP/ucpp$port.client")"
	else
		t_fail "ibv_uc_pingpong $label"
	fi
}

run default
run "-s 1" -s 1 -n 200
run "-s 65536" -s 65536 -n 100
run "-s 1048576" -s 1048576 -n 10
run "-n 5000" -n 5000
run "-e" -e -n 300
run "-m 256" -m 256 -n 200
t_done
