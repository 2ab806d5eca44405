#!/usr/bin/env bash
# Debian's unmodified ibv_xsrq_pingpong: XRC send/receive QPs, XRC SRQs in a
# domain both sides open through the same file (/tmp/xrc_domain), as two
# processes on srn_lo through `softrnic run` (docs/xrc.md).  Each
# configuration must exit 0 on every side and say "success".
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_xsrq_pingpong
# (seen under load: a client 0.3 s after its server found nothing listening)
T_START_WAIT=1
# Not run: -c N > 1, where the server sends to one client's SRQ through
# another client's target QP, which lives in another process (docs/xrc.md).

run() { # label, extra args
	local label=$1; shift
	local port; port=$(t_port)
	if t_pair "xsrq$port" 60 "ibv_xsrq_pingpong -d srn_lo -g 0 -p $port $*" \
		"ibv_xsrq_pingpong -d srn_lo -g 0 -p $port $* 127.0.0.1" &&
	   grep -qx "success" "$T_TMP/xsrq$port.client" &&
	   grep -qx "success" "$T_TMP/xsrq$port.server"; then
		t_pass "ibv_xsrq_pingpong $label"
	else
		t_fail "ibv_xsrq_pingpong $label"
	fi
}

run default
run "-s 1" -s 1 -n 200
run "-s 65536" -s 65536 -n 50
run "-m 1024 -s 10000" -m 1024 -s 10000 -n 100
run "-n 2000" -n 2000
run "-e" -e -n 300

t_done
