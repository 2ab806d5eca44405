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

# GID 1 of srn_lo is ::1, of another family than the device's address:
# refused at RTR (EINVAL) on both sides at once, not a silent hang.
port=$(t_port)
t0=$(date +%s%N)
t_pair "g1" 20 "ibv_rc_pingpong -d srn_lo -g 1 -p $port" \
	"ibv_rc_pingpong -d srn_lo -g 1 -p $port 127.0.0.1" >/dev/null
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ "$T_PAIR_SRV" -ne 0 ] && [ "$T_PAIR_CLI" -ne 0 ] && [ "$T_PAIR_SRV" -ne 124 ] &&
   [ "$T_PAIR_CLI" -ne 124 ] && grep -q "Failed to modify QP to RTR" "$T_TMP/g1.server" "$T_TMP/g1.client"; then
	t_pass "ibv_rc_pingpong -g 1 (::1 on an IPv4 device): refused at RTR, both exit in $ms ms"
else
	t_fail "ibv_rc_pingpong -g 1: refused at RTR (server exit $T_PAIR_SRV, client exit $T_PAIR_CLI)"
fi
t_done
