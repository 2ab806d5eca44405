#!/usr/bin/env bash
# Debian's unmodified rping over the iWARP device (SOFTRNIC_DEVICES=lo:iwarp,
# so srn_iw_lo is the only device): rdma_cm connects over TCP + MPA, then
# SEND/RECV, RDMA READ and RDMA WRITE of a ping pattern rping verifies (-V),
# server and client in separate processes on 127.0.0.1.  The iWARP path is
# TCP whatever SOFTRNIC_TRANSPORT says, so this runs once (CMakeLists.txt).
. "$(dirname "$0")/../lib/e2e.sh"
t_need rping ss
export SOFTRNIC_DEVICES=lo:iwarp

. "$(dirname "$0")/../lib/rping.sh"
T_RPING_SECS=60

# The listener is a TCP socket at rping's port (what makes it iWARP's
# connection manager, not the IB CM over UDP).
port=$(t_port)
timeout -k 2 30 "$SOFTRNIC" run -- rping -s -a 127.0.0.1 -p "$port" -C 1 -V \
	>"$T_TMP/listen.server" 2>&1 &
spid=$!
seen=0
for _ in $(seq 1 100); do
	if ss -Hltn "sport = :$port" | grep -q LISTEN; then seen=1; break; fi
	sleep 0.05
done
if [ "$seen" -eq 1 ]; then t_pass "rping -s listens on TCP port $port"
else t_fail "rping -s listens on TCP port $port"; fi
timeout -k 2 30 "$SOFTRNIC" run -- rping -c -a 127.0.0.1 -p "$port" -C 1 -V \
	>"$T_TMP/listen.client" 2>&1
cli=$?
wait $spid
srv=$?
if [ $cli -eq 0 ] && [ $srv -eq 0 ]; then t_pass "one ping over that listener"
else t_fail "one ping over that listener (client $cli, server $srv)"
	tail -5 "$T_TMP/listen.client" "$T_TMP/listen.server"; fi

rping_one "-C 20" 20
rping_one "-S 23 (smallest)" 10 -S 23
rping_one "-S 65535 (largest, many FPDUs)" 5 -S 65535

# Nobody listens: TCP is refused, rping hears REJECTED (status -111,
# -ECONNREFUSED), its QP flushes the posted receive so its CQ thread
# ends, and the client exits non-zero at once instead of hanging.
port=$(t_port)
start=$(date +%s%N)
timeout -k 2 20 "$SOFTRNIC" run -- rping -c -a 127.0.0.1 -p "$port" -C 1 \
	>"$T_TMP/refused.client" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $ms -lt 10000 ] &&
	grep -q "RDMA_CM_EVENT_REJECTED, error -111" "$T_TMP/refused.client"; then
	t_pass "no listener: client fails in $ms ms (exit $rc)"
else
	t_fail "no listener: client exit $rc after $ms ms"; tail -5 "$T_TMP/refused.client"
fi
t_done
