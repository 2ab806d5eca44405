#!/usr/bin/env bash
# Debian's unmodified rdmacm-utils over softrnic, each as server and client
# processes on 127.0.0.1: ucmatose (10 and 100 connections, sends both
# ways; one server process serving two client processes),
# rdma_server/rdma_client (synchronous rdma_create_ep API), cmtime (100
# connections: create/resolve/connect/disconnect timing).
. "$(dirname "$0")/../lib/e2e.sh"
t_need ucmatose rdma_server rdma_client cmtime

port=$(t_port)
if t_pair "ucmatose" 60 "ucmatose -p $port -c 10" "ucmatose -s 127.0.0.1 -p $port -c 10" &&
   grep -q "data transfers complete" "$T_TMP/ucmatose.client" &&
   grep -q "disconnected" "$T_TMP/ucmatose.server"; then
	t_pass "ucmatose -c 10: 10 connections, data both ways, disconnected, both exit 0"
else
	t_fail "ucmatose -c 10"
fi

# One listener process, two client processes (the host-wide directory).
port=$(t_port)
timeout -k 2 60 "$SOFTRNIC" run -- ucmatose -p "$port" -c 4 >"$T_TMP/uc4.server" 2>&1 &
spid=$!
sleep 0.3
timeout -k 2 50 "$SOFTRNIC" run -- ucmatose -s 127.0.0.1 -p "$port" -c 2 >"$T_TMP/uc4.c1" 2>&1 &
c1pid=$!
timeout -k 2 50 "$SOFTRNIC" run -- ucmatose -s 127.0.0.1 -p "$port" -c 2 >"$T_TMP/uc4.c2" 2>&1
c2=$?
wait "$c1pid"; c1=$?
wait "$spid"; srv=$?
if [ $srv -eq 0 ] && [ $c1 -eq 0 ] && [ $c2 -eq 0 ]; then
	t_pass "ucmatose: a server process (-c 4) serves two client processes (-c 2 each)"
else
	for f in server c1 c2; do echo "  $f:"; sed 's/^/    | /' "$T_TMP/uc4.$f" | tail -8; done
	t_fail "ucmatose: one server, two client processes (exits $srv $c1 $c2)"
fi

port=$(t_port)
if t_pair "ucmatose100" 60 "ucmatose -p $port -c 100" "ucmatose -s 127.0.0.1 -p $port -c 100"; then
	t_pass "ucmatose -c 100: 100 connections at once, both exit 0"
else
	t_fail "ucmatose -c 100"
fi

port=$(t_port)
if t_pair "rdma_server" 30 "rdma_server -p $port" "rdma_client -s 127.0.0.1 -p $port" &&
   grep -q "rdma_client: end 0" "$T_TMP/rdma_server.client" &&
   grep -q "rdma_server: end 0" "$T_TMP/rdma_server.server"; then
	t_pass "rdma_server + rdma_client (rdma_create_ep, rdma_get_request, send/recv): end 0"
else
	t_fail "rdma_server + rdma_client"
fi

# cmtime's server serves until killed: run it, run the client, stop it.
port=$(t_port)
timeout -k 2 60 "$SOFTRNIC" run -- cmtime -b 127.0.0.1 -p "$port" -c 100 >"$T_TMP/cmtime.server" 2>&1 &
spid=$!
sleep 0.3
timeout -k 2 50 "$SOFTRNIC" run -- cmtime -s 127.0.0.1 -p "$port" -c 100 >"$T_TMP/cmtime.client" 2>&1
rc=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
if [ $rc -eq 0 ] && grep -q "^connect *:" "$T_TMP/cmtime.client" &&
   grep -q "^disconnect *:" "$T_TMP/cmtime.client"; then
	t_pass "cmtime -c 100: every step timed, exit 0"
	grep -E "^(connect|disconnect) " "$T_TMP/cmtime.client" | sed 's/^/       /'
else
	echo "  client exit $rc:"; sed 's/^/    | /' "$T_TMP/cmtime.client" | tail -15
	t_fail "cmtime -c 100"
fi
t_done
