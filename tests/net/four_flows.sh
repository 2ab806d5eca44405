#!/usr/bin/env bash
# Several flows between the same two hosts at once (what every
# multi-process job across hosts does): two network namespaces this test
# creates, joined by a veth pair (192.168.80.0/24, addresses only inside
# them), four server processes in one and four clients in the other.  On
# each side every engine receives at port 4791 through the group the
# first one's socket leads, and the group's program sends each datagram
# to the engine owning its QP (net/steer.h; SOFTRNIC_STEER=0: the first
# engine hands the others' packets on).  Four ib_write_bw pairs (64 KiB x
# 500, QP timeout 18: a process waiting for a CPU on this shared host
# must not end in RETRY_EXC_ERR) and then four ibv_rc_pingpong -c pairs
# (data checked) must all complete, with an idle process on each side
# holding port 4791 throughout.  With steering, almost nothing may reach
# the servers through their inboxes, handed on by another engine (their
# counters, SOFTRNIC_LOG=debug).
# Throughput is printed, not asserted.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need ib_write_bw ibv_rc_pingpong
t_netns_up srnff 192.168.80
t_netns_devs ff
N=4

# An anchor on each side holds port 4791 for the whole test: an
# ibv_rc_pingpong server no client ever reaches (its QP makes its engine
# bind the port first).  Otherwise the first pair to finish would take
# the port with it, and the survivors would lose what was in flight while
# another engine takes it over (port_takeover_two_hosts.sh tests that);
# here it is the steady hand-over that is measured.
anchors=()
for side in A B; do
	ns=$NA dev=$DA
	[ $side = B ] && ns=$NB dev=$DB
	SOFTRNIC_DEVICES=v$side=$dev timeout -k 2 300 ip netns exec "$ns" "$SOFTRNIC" run -- \
		ibv_rc_pingpong -g 0 -d "$dev" -p "$(t_port)" >"$T_TMP/anchor.$side" 2>&1 &
	anchors+=($!)
done
trap 'kill "${anchors[@]}" 2>/dev/null; wait "${anchors[@]}" 2>/dev/null; t_netns_down; rm -f /dev/shm/softrnic-"$DA"-* /dev/shm/softrnic-"$DB"-*' EXIT
sleep 0.5

# flows NAME "ARGS": N servers in NA, then N clients in NB, ports apart;
# every one must exit 0.
flows() {
	local name=$1 args=$2 base i spids=() cpids=() bad=0
	base=$(t_port)
	for i in $(seq 1 $N); do
		SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA=$DA timeout -k 2 240 \
			ip netns exec "$NA" "$SOFTRNIC" run -- \
			$args -d $DA -p $((base + i)) >"$T_TMP/$name.s$i" 2>&1 &
		spids+=($!)
	done
	sleep 0.7
	for i in $(seq 1 $N); do
		SOFTRNIC_DEVICES=vB=$DB timeout -k 2 240 ip netns exec "$NB" "$SOFTRNIC" run -- \
			$args -d $DB -p $((base + i)) 192.168.80.1 >"$T_TMP/$name.c$i" 2>&1 &
		cpids+=($!)
	done
	for i in $(seq 1 $N); do
		wait ${cpids[$((i - 1))]} || { bad=1; echo "  client $i exit $?"; tail -5 "$T_TMP/$name.c$i"; }
		wait ${spids[$((i - 1))]} || { bad=1; echo "  server $i exit $?"; tail -5 "$T_TMP/$name.s$i"; }
	done
	return $bad
}

if flows bw "ib_write_bw -x 0 -F -s 65536 -n 500 -u 18"; then
	t_pass "$N ib_write_bw pairs at once: $(for i in $(seq 1 $N); do
		grep -E '^ +65536 +' "$T_TMP/bw.c$i" | awk '{printf "%s ", $4}'; done)MB/s"
else
	t_fail "$N ib_write_bw pairs at once"
fi
# what the servers' engines received, and what of it came handed on by
# another engine (through their inboxes: the clients are on another host)
# (a counter's line may follow perftest's last output on the same line)
count() {
	cat "$T_TMP"/bw.s* | grep -o "\]: $1 [0-9]*" | awk '{ s += $3 } END { print s + 0 }'
}
rx=$(count rx_packets)
fw=$(count rx_shm_packets)
if [ "${SOFTRNIC_STEER:-1}" = 0 ]; then
	echo "  (SOFTRNIC_STEER=0: $fw of the servers' $rx packets were handed on)"
elif [ "$rx" -gt 0 ] && [ $((fw * 100)) -le "$rx" ]; then
	t_pass "steered: $fw of the servers' $rx packets were handed on (<= 1%)"
else
	t_fail "steered: $fw of the servers' $rx packets were handed on (<= 1%)"
fi
if flows pp "ibv_rc_pingpong -g 0 -c -s 65536 -n 200"; then
	t_pass "$N ibv_rc_pingpong -c pairs at once, data checked: $(for i in $(seq 1 $N); do
		grep -o '[0-9.]* Mbit/sec' "$T_TMP/pp.c$i" | tr '\n' ' '; done)"
else
	t_fail "$N ibv_rc_pingpong -c pairs at once"
fi
t_done
