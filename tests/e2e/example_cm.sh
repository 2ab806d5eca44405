#!/usr/bin/env bash
# examples/cm_server + cm_client: an rdma_cm connection that carries a
# WRITE, a SEND with immediate data and a reply; each program checks the
# data itself and exits non-zero on any failure.
. "$(dirname "$0")/../lib/e2e.sh"
ex=$SRN_BUILD/examples
[ -x "$ex/cm_server" ] && [ -x "$ex/cm_client" ] || { t_fail "examples not built"; t_done; }
srv_out=$T_TMP/cm_server.out cli_out=$T_TMP/cm_client.out
timeout -k 2 60 "$ex/cm_server" -a 127.0.0.1 >"$srv_out" 2>&1 &
srv=$!
port=
for _ in $(seq 100); do # the server prints its port once it listens (<= 10 s)
	port=$(sed -n 's/.*listening on 127.0.0.1 port \([0-9]*\).*/\1/p' "$srv_out")
	[ -n "$port" ] || ! kill -0 $srv 2>/dev/null && break
	sleep 0.1
done
if [ -n "$port" ]; then
	t_pass "cm_server listens on port $port"
	if timeout -k 2 60 "$ex/cm_client" -a 127.0.0.1 -p "$port" >"$cli_out" 2>&1; then
		t_pass "cm_client exits 0"
	else
		t_fail "cm_client exit status"; sed 's/^/    | /' "$cli_out" | tail -20
	fi
else
	t_fail "cm_server printed no port"
fi
if wait $srv; then t_pass "cm_server exits 0"; else
	t_fail "cm_server exit status"; sed 's/^/    | /' "$srv_out" | tail -20
fi
for line in "client wrote \"written by the client" "replied \"pong\"" "event RDMA_CM_EVENT_DISCONNECTED"; do
	if grep -qF "$line" "$srv_out"; then t_pass "server: $line"; else t_fail "server: $line"; fi
done
for line in "server offers 4096 bytes" "server replied \"pong\"" "event RDMA_CM_EVENT_DISCONNECTED"; do
	if grep -qF "$line" "$cli_out"; then t_pass "client: $line"; else t_fail "client: $line"; fi
done
t_done
