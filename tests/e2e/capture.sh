#!/usr/bin/env bash
# softrnic capture: while it runs, ibv_rc_pingpong (two processes) and an
# RDMA READ test go through a device of its own; tshark must decode the pcapng with
# nothing malformed, every SEND segment and ACK exactly once, half of
# the data each way between the two processes, every packet marked as
# sent here (outbound), and on the default path every packet marked as
# synthesized (the direct path sends none), on udp none.  Also: READs, a
# capture killed with SIGKILL during traffic (the next one takes over),
# bad usage, a missing directory, a second capture of the device.
# (SOFTRNIC_PCAP within one process: tests/api/test_pcap_self.c.)
. "$(dirname "$0")/../lib/e2e.sh"
t_need tshark ibv_rc_pingpong ib_read_bw
udp=0; [ "${SOFTRNIC_TRANSPORT:-}" = udp ] && udp=1
# A device of its own on lo (one name per path, so both variants may run
# at once): a capture takes every process of its device, and counts here
# are exact.
DEV=srn_capt$udp
export SOFTRNIC_DEVICES=lo=$DEV
N=20 SIZE=4096 MTU=1024
SEG=$((SIZE / MTU))
DECODE=(-d udp.port==4791,infiniband -Y infiniband)

# capture_start FILE: the tool in the background, ready when it says so
# (bounded by its own -t; CAP_PID is the tool's, to signal).
capture_start() {
	"$SOFTRNIC" capture -w "$1" -d $DEV -t 50 >"$1.log" 2>&1 &
	CAP_PID=$!
	for _ in $(seq 100); do
		grep -q "capturing" "$1.log" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
# capture_stop: Ctrl-C and reap; its exit status.
capture_stop() {
	kill -INT "$CAP_PID" 2>/dev/null
	wait "$CAP_PID"
}

cap="$T_TMP/rc.pcapng"
capture_start "$cap" && t_pass "capture started" || t_fail "capture did not start"
port=$(t_port)
t_pair "pp" 60 "ibv_rc_pingpong -d $DEV -g 0 -p $port -s $SIZE -m $MTU -n $N" \
	"ibv_rc_pingpong -d $DEV -g 0 -p $port -s $SIZE -m $MTU -n $N 127.0.0.1" &&
	t_pass "ibv_rc_pingpong -n $N under capture" || t_fail "ibv_rc_pingpong under capture"
capture_stop && t_pass "capture exits 0 on SIGINT" || t_fail "capture exit status"
sed 's/^/    | /' "$cap.log"

fields=$(tshark -r "$cap" "${DECODE[@]}" -T fields -E separator=';' \
	-e frame.packet_flags_direction -e infiniband.bth.opcode -e infiniband.bth.destqp \
	-e infiniband.bth.psn -e frame.comment 2>/dev/null)
count() { printf '%s\n' "$fields" | awk -F';' -v op="$1" '$2 == op' | grep -c .; }
first=$(count 0) middle=$(count 1) last=$(count 2) acks=$(count 17)
total=$(printf '%s\n' "$fields" | grep -c .)
echo "  $total packets: SEND_FIRST $first, SEND_MIDDLE $middle, SEND_LAST $last, ACK $acks"
# rc_pingpong: N messages each way
[ "$first" -eq $((2 * N)) ] && [ "$last" -eq $((2 * N)) ] &&
	[ "$middle" -eq $((2 * N * (SEG - 2))) ] &&
	t_pass "every SEND segment once: $first first, $middle middle, $last last" ||
	t_fail "SEND segments: $first first, $middle middle, $last last (want $((2 * N)), $((2 * N * (SEG - 2))), $((2 * N)))"
if [ $udp -eq 1 ]; then
	# the responder ACKs at least the last packet of each message or more
	[ "$acks" -ge 1 ] && [ "$acks" -le $((2 * N * SEG)) ] &&
		t_pass "udp: $acks ACKs" || t_fail "udp: $acks ACKs"
else
	[ "$acks" -eq $((2 * N)) ] && t_pass "direct: one ACK per message ($acks)" ||
		t_fail "direct: $acks ACKs, want $((2 * N))"
fi
dups=$(printf '%s\n' "$fields" | awk -F';' '{print $2, $3, $4}' | sort | uniq -d | grep -c .)
[ "$dups" -eq 0 ] && t_pass "no packet twice (opcode, QP, PSN)" ||
	t_fail "$dups packets appear twice"
notout=$(printf '%s\n' "$fields" | awk -F';' '$1 != "0x00000002"' | grep -c .)
[ "$notout" -eq 0 ] && t_pass "every packet marked outbound (sent by a process here)" ||
	t_fail "$notout packets not outbound"
synth=$(printf '%s\n' "$fields" | grep -c "synthesized")
if [ $udp -eq 1 ]; then
	[ "$synth" -eq 0 ] && t_pass "udp: nothing synthesized" || t_fail "udp: $synth synthesized"
	paired=$(printf '%s\n' "$fields" | grep -cE 'softrnic: pid [0-9]+ qp [0-9]+ -> pid [0-9]+ qp [0-9]+$')
	[ "$paired" -eq "$total" ] && t_pass "udp: all $total named by sender and receiver" ||
		t_fail "udp: $paired of $total named by sender and receiver"
else
	[ "$synth" -eq "$total" ] && t_pass "direct: all $total marked synthesized" ||
		t_fail "direct: $synth of $total marked synthesized"
fi
# the data half each way: DATA from the sender "pid A qp X -> pid B"
ways=$(printf '%s\n' "$fields" | awk -F';' '$2 <= 2' |
	sed -nE 's/.*softrnic: pid ([0-9]+) qp [0-9]+ -> pid ([0-9]+).*/\1>\2/p' | sort | uniq -c)
echo "$ways" | sed 's/^/    /'
nways=$(echo "$ways" | grep -c .)
balanced=$(echo "$ways" | awk -v w=$((N * SEG)) '$1 == w' | grep -c .)
[ "$nways" -eq 2 ] && [ "$balanced" -eq 2 ] &&
	t_pass "$((N * SEG)) data packets each way between the two processes" ||
	t_fail "data directions: $(echo $ways)"
if tshark -r "$cap" -d udp.port==4791,infiniband -V 2>/dev/null | grep -qi malformed; then
	t_fail "tshark reports a malformed packet"
else
	t_pass "no malformed packets"
fi

# RDMA READ (direct: synthesized request and responses)
cap="$T_TMP/read.pcapng"
capture_start "$cap" || t_fail "capture did not start"
port=$(t_port)
t_pair "rd" 60 "ib_read_bw -d $DEV -x 0 -F -p $port -s 8192 -n 5" \
	"ib_read_bw -d $DEV -x 0 -F -p $port -s 8192 -n 5 127.0.0.1" >/dev/null ||
	t_fail "ib_read_bw under capture"
capture_stop || t_fail "capture exit status (read)"
ops=$(tshark -r "$cap" "${DECODE[@]}" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c)
echo "$ops" | sed 's/^/    /'
req=$(echo "$ops" | awk '$2 == 12 {print $1}')
resp=$(echo "$ops" | awk '$2 >= 13 && $2 <= 16 {s += $1} END {print s + 0}')
[ "${req:-0}" -ge 5 ] && [ "$resp" -ge "$req" ] &&
	t_pass "RDMA READ: $req requests, $resp response packets" ||
	t_fail "RDMA READ: ${req:-0} requests, $resp responses"

# a capture killed with SIGKILL: the next one takes over its ring and the
# engines it had marked, while the traffic goes on
port=$(t_port)
timeout -k 2 30 "$SOFTRNIC" run -- ib_write_bw -d $DEV -x 0 -F -p "$port" -s 64 -D 8 \
	>"$T_TMP/kill.server" 2>&1 &
kpid=$!
sleep "$T_START_WAIT"
timeout -k 2 30 "$SOFTRNIC" run -- ib_write_bw -d $DEV -x 0 -F -p "$port" -s 64 -D 8 \
	127.0.0.1 >"$T_TMP/kill.client" 2>&1 &
kcpid=$!
capture_start "$T_TMP/killed.pcapng" || t_fail "capture did not start (kill)"
# kill it once the traffic shows in its file (more than the headers)
for _ in $(seq 100); do
	[ "$(stat -c %s "$T_TMP/killed.pcapng" 2>/dev/null || echo 0)" -gt 4096 ] && break
	sleep 0.05
done
kill -KILL "$CAP_PID"; wait "$CAP_PID" 2>/dev/null
"$SOFTRNIC" capture -w "$T_TMP/after.pcapng" -d $DEV -t 0.5 -b 4 >"$T_TMP/after.log" 2>&1; rc=$?
# (the traffic must have outlasted the capture for the count to mean anything;
# a small ring: writing out a full 64 MiB one takes seconds under load)
kill -0 "$kcpid" 2>/dev/null && running=1 || running=0
wait "$kcpid"; kc=$?
wait "$kpid"; ks=$?
got=$(tshark -r "$T_TMP/after.pcapng" "${DECODE[@]}" -T fields -e infiniband.bth.opcode 2>/dev/null |
	grep -c .)
[ $running -eq 1 ] || t_fail "ib_write_bw -D 8 ended before the second capture did"
[ $rc -eq 0 ] && [ "$got" -gt 0 ] &&
	t_pass "after a killed capture, the next one sees the running engines ($got packets in 0.5 s)" ||
	{ t_fail "after a killed capture: exit $rc, $got packets"; cat "$T_TMP/after.log"; }
[ $kc -eq 0 ] && [ $ks -eq 0 ] && t_pass "ib_write_bw unharmed by a killed capture" ||
	t_fail "ib_write_bw exit $ks/$kc around a killed capture"

# overload (udp, where every packet has two records): a 1 MiB ring under
# ib_write_bw overflows; the lost records are counted, and a packet whose
# other record was lost is still named by both processes, never as one
# from or to another host
if [ $udp -eq 1 ]; then
	cap="$T_TMP/full.pcapng"
	"$SOFTRNIC" capture -w "$cap" -d $DEV -t 50 -b 1 >"$cap.log" 2>&1 &
	CAP_PID=$!
	for _ in $(seq 100); do grep -q capturing "$cap.log" 2>/dev/null && break; sleep 0.05; done
	port=$(t_port)
	t_pair "full" 60 "ib_write_bw -d $DEV -x 0 -F -p $port -s 65536 -D 2" \
		"ib_write_bw -d $DEV -x 0 -F -p $port -s 65536 -D 2 127.0.0.1" >/dev/null ||
		t_fail "ib_write_bw under a full capture ring"
	capture_stop || t_fail "capture exit status (full ring)"
	sed 's/^/    | /' "$cap.log"
	lost=$(sed -n 's/.*; \([0-9]*\) lost to a full ring.*/\1/p' "$cap.log")
	said=$(sed -n 's/.*; \([0-9]*\) between two processes here with one record missing.*/\1/p' "$cap.log")
	notes=$(tshark -r "$cap" "${DECODE[@]}" -T fields -e frame.comment 2>/dev/null)
	strangers=$(printf '%s\n' "$notes" | grep -cE 'not sent by softrnic|no receiver')
	halves=$(printf '%s\n' "$notes" | grep -cE '^softrnic: pid [0-9]+ qp [0-9]+ -> pid [0-9]+ qp [0-9]+ \((receive|send) record missing')
	[ "${lost:-0}" -gt 0 ] && t_pass "a 1 MiB ring overflows and counts it ($lost records lost)" ||
		t_fail "the 1 MiB ring did not overflow (lost: ${lost:-?})"
	[ "$strangers" -eq 0 ] && t_pass "no packet between two processes here named as another host's" ||
		t_fail "$strangers packets labelled as from or to another host"
	[ "$halves" -eq "${said:-0}" ] &&
		t_pass "$halves packets with one record missing, named by both processes" ||
		t_fail "half-recorded packets: $halves in the file, ${said:-0} counted"
fi

# bad usage and a file that cannot be made
"$SOFTRNIC" capture -d $DEV >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && t_pass "capture without -w: exit 2" || t_fail "capture without -w: exit $rc"
"$SOFTRNIC" capture -w "$T_TMP/no/such/dir/x.pcapng" -d $DEV -t 1 >/dev/null 2>&1; rc=$?
[ $rc -eq 1 ] && t_pass "capture into a missing directory: exit 1" ||
	t_fail "capture into a missing directory: exit $rc"
capture_start "$T_TMP/one.pcapng" || t_fail "capture did not start"
"$SOFTRNIC" capture -w "$T_TMP/two.pcapng" -d $DEV -t 1 >"$T_TMP/two.log" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "another softrnic capture" "$T_TMP/two.log" &&
	t_pass "a second capture of the device is refused" || t_fail "second capture: exit $rc"
capture_stop >/dev/null

t_done
