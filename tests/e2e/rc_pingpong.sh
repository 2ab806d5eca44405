#!/usr/bin/env bash
# Debian's unmodified ibv_rc_pingpong, server and client as two processes on
# srn_lo, through `softrnic run`: each configuration must exit 0 on both
# sides and report the exchange.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_rc_pingpong

run() { # label, extra args
	local label=$1; shift
	local port; port=$(t_port)
	if t_pair "rcpp$port" 60 "ibv_rc_pingpong -d srn_lo -g 0 -p $port $*" \
		"ibv_rc_pingpong -d srn_lo -g 0 -p $port $* 127.0.0.1" &&
	   grep -q "bytes in .* seconds" "$T_TMP/rcpp$port.client" &&
	   grep -q "iters in .* seconds" "$T_TMP/rcpp$port.server"; then
		t_pass "ibv_rc_pingpong $label: $(grep 'bytes in' "$T_TMP/rcpp$port.client")"
	else
		t_fail "ibv_rc_pingpong $label"
	fi
}

run default
run "-s 1" -s 1 -n 200
run "-s 4096" -s 4096 -n 200
run "-s 65536" -s 65536 -n 100
run "-s 1048576" -s 1048576 -n 20
run "-n 10000" -n 10000
run "-e" -e -n 500
run "-m 256" -m 256 -n 200
run "-m 1024" -m 1024 -n 200
run "-m 4096" -m 4096 -n 200
run "-c" -c -n 200
run "-N (new send API)" -N -n 200

# GID 1 (::1, IPv6) and families mixed: e2e/ipv6.sh.
t_done
