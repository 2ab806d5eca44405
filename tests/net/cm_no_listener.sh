#!/usr/bin/env bash
# A connect to a host where softrnic runs but no process uses rdma_cm is
# refused at once (REJ, invalid service id, as Linux's CM answers a REQ
# nobody listens for), not left to time out: the CM directory in /dev/shm
# is shared by every namespace of the host, but only the agents of the
# REQ's own namespace may take it.  Two network namespaces this test
# creates, joined by a veth pair (192.168.82.0/24, addresses only inside
# them): in NA an ibv_rc_pingpong server holds the device (and port 4791)
# and nothing uses rdma_cm; from NB `rping -c` must fail with
# RDMA_CM_EVENT_REJECTED within 5 s (a lost REQ would take ~16 s).  Then
# an rping server in NA and the same client must work: the refusal is
# not in the way of a listener.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need rping ibv_rc_pingpong
t_netns_up srncm 192.168.82
t_netns_devs cm

SOFTRNIC_DEVICES=vA=$DA timeout -k 2 60 ip netns exec "$NA" "$SOFTRNIC" run -- \
	ibv_rc_pingpong -d $DA -g 0 -p "$(t_port)" >"$T_TMP/anchor" 2>&1 &
anchor=$!
trap 'kill $anchor 2>/dev/null; wait $anchor 2>/dev/null; t_netns_down; rm -f /dev/shm/softrnic-"$DA"-* /dev/shm/softrnic-"$DB"-*' EXIT
sleep 0.5

port=$(t_port)
t0=$(date +%s%N)
SOFTRNIC_DEVICES=vB=$DB timeout -k 2 30 ip netns exec "$NB" "$SOFTRNIC" run -- \
	rping -c -a 192.168.82.1 -p "$port" -C 1 -v >"$T_TMP/c1" 2>&1
st=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $st -ne 0 ] && grep -q "REJECTED" "$T_TMP/c1" && [ $ms -le 5000 ]; then
	t_pass "no rdma_cm process in NA: rping refused in $ms ms ($(grep -o 'RDMA_CM_EVENT_REJECTED[^,]*' "$T_TMP/c1" | head -1))"
else
	t_fail "no rdma_cm process in NA: rping refused within 5 s (exit $st after $ms ms)"
	sed 's/^/    | /' "$T_TMP/c1" | tail -5
fi

SOFTRNIC_DEVICES=vA=$DA timeout -k 2 30 ip netns exec "$NA" "$SOFTRNIC" run -- \
	rping -s -a 192.168.82.1 -p "$port" -C 3 -v >"$T_TMP/s2" 2>&1 &
spid=$!
sleep 1
SOFTRNIC_DEVICES=vB=$DB timeout -k 2 30 ip netns exec "$NB" "$SOFTRNIC" run -- \
	rping -c -a 192.168.82.1 -p "$port" -C 3 -v >"$T_TMP/c2" 2>&1
cst=$?
wait $spid
sst=$?
if [ $cst -eq 0 ] && [ $sst -eq 0 ] && [ "$(grep -c 'ping data' "$T_TMP/c2")" -ge 3 ]; then
	t_pass "with a listener in NA: rping -C 3 -v works"
else
	t_fail "with a listener in NA: rping -C 3 -v (client exit $cst, server exit $sst)"
	sed 's/^/    client | /' "$T_TMP/c2" | tail -5
	sed 's/^/    server | /' "$T_TMP/s2" | tail -5
fi
t_done
