#!/usr/bin/env bash
# Debian's unmodified ibv_ud_pingpong: Unreliable Datagram (one packet per message: sizes up to the 4096 MTU).
# Server and client as two processes on srn_lo through `softrnic run`:
# each configuration must exit 0 on both sides and report the exchange.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_ud_pingpong

run() { # label, extra args
	local label=$1; shift
	local port; port=$(t_port)
	if t_pair "udpp$port" 60 "ibv_ud_pingpong -d srn_lo -g 0 -p $port $*" \
		"ibv_ud_pingpong -d srn_lo -g 0 -p $port $* 127.0.0.1" &&
	   grep -q "bytes in .* seconds" "$T_TMP/udpp$port.client" &&
	   grep -q "iters in .* seconds" "$T_TMP/udpp$port.server"; then
		t_pass "ibv_ud_pingpong $label: $(grep 'bytes in' "$T_TMP/udpp$port.client")"
	else
		t_fail "ibv_ud_pingpong $label"
	fi
}

run default
run "-s 1" -s 1 -n 200
run "-s 1024" -s 1024 -n 200
run "-s 4000" -s 4000 -n 200
run "-n 5000" -n 5000
run "-e" -e -n 300
run "-r 50" -r 50 -n 500
t_done
