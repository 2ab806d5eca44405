#!/usr/bin/env bash
# Debian's unmodified ibv_srq_pingpong: RC QPs sharing one shared receive queue.
# Server and client as two processes on srn_lo through `softrnic run`:
# each configuration must exit 0 on both sides and report the exchange.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_srq_pingpong

run() { # label, extra args
	local label=$1; shift
	local port; port=$(t_port)
	if t_pair "srqpp$port" 60 "ibv_srq_pingpong -d srn_lo -g 0 -p $port $*" \
		"ibv_srq_pingpong -d srn_lo -g 0 -p $port $* 127.0.0.1" &&
	   grep -q "bytes in .* seconds" "$T_TMP/srqpp$port.client" &&
	   grep -q "iters in .* seconds" "$T_TMP/srqpp$port.server"; then
		t_pass "ibv_srq_pingpong $label: $(grep 'bytes in' "$T_TMP/srqpp$port.client")"
	else
		t_fail "ibv_srq_pingpong $label"
	fi
}

run default
run "-s 1" -s 1 -n 200
run "-s 65536" -s 65536 -n 100
run "-q 4" -q 4 -n 300
run "-q 32 -r 200" -q 32 -r 200 -n 200
run "-n 5000" -n 5000
run "-e" -e -n 300
t_done
