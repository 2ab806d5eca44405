#!/usr/bin/env bash
# The parts of the interop suite (tests/interop/, qemu, not in make check)
# that need no guest: the guest's helpers under this host's sh, and the
# result checks against real output of the programs the suite runs, here
# between two softrnic processes on srn_lo.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_rc_pingpong ib_write_bw rping setsid
STREAM=$SRN_BUILD/tests/rc_stream_check
IO=$SRN_SOURCE/tests/interop
. "$IO/lib.sh"
. "$IO/checks.sh"
G=$IO/guest

# io-retry: reruns until success, else returns the last status
echo 0 >"$T_TMP/n"
sh "$G/io-retry" 4 sh -c 'n=$(($(cat '"$T_TMP"'/n) + 1)); echo $n >'"$T_TMP"'/n; [ $n -ge 3 ]' >/dev/null
rc=$? n=$(cat "$T_TMP/n")
[ $rc -eq 0 ] && [ "$n" -eq 3 ] && t_pass "io-retry: success on attempt 3" || t_fail "io-retry: rc $rc after $n"
sh "$G/io-retry" 2 sh -c 'exit 5' >/dev/null
rc=$?
[ $rc -eq 5 ] && t_pass "io-retry: gives up with the last status" || t_fail "io-retry: rc $rc, want 5"

# io-bg + io-wait: output and status collected; 124 while still running
PATH=$G:$PATH
b=iot$$
sh "$G/io-bg" $b 10 'echo out; exit 3'
out=$(sh "$G/io-wait" $b 10)
rc=$?
[ $rc -eq 3 ] && [ "$out" = out ] && t_pass "io-bg/io-wait: output and status" ||
	t_fail "io-bg/io-wait: rc $rc, output '$out'"
sh "$G/io-bg" $b 10 'sleep 5'
out=$(sh "$G/io-wait" $b 1)
rc=$?
[ $rc -eq 124 ] && t_pass "io-wait: 124 while running" || t_fail "io-wait: rc $rc, want 124"
sh "$G/io-wait" $b 10 >/dev/null
rm -f /tmp/$b.out /tmp/$b.rc /tmp/$b.sh

# the checks on real output (softrnic on both ends, with its debug counters)
L=$T_TMP/c
port=$(t_port)
if SOFTRNIC_LOG=debug t_pair pp 60 "ibv_rc_pingpong -d srn_lo -g 0 -p $port -c -s 4096 -n 5" \
	"ibv_rc_pingpong -d srn_lo -g 0 -p $port -c -s 4096 -n 5 127.0.0.1"; then
	note=$(chk_pp "$L" "$T_TMP/pp.client") && t_pass "chk_pp: $note" || t_fail "chk_pp: $note"
	# debug counters go to stderr, which t_pair keeps with stdout
	cp "$T_TMP/pp.client" "$L.hostlog"
	tx=$(io_counter tx_packets "$L.hostlog")
	# over UDP: packets counted, no selective retransmission (plain
	# ibv_rc_pingpong); same-host: no packets, so no verdict at all
	if [ "${SOFTRNIC_TRANSPORT:-}" = udp ]; then
		[ "$tx" -gt 0 ] && t_pass "io_counter: tx_packets $tx" || t_fail "io_counter: tx_packets $tx"
		note=$(chk_gbn "$L" "$T_TMP/pp.client") && t_pass "chk_gbn: $note" || t_fail "chk_gbn: $note"
	else
		note=$(chk_gbn "$L" "$T_TMP/pp.client") && t_fail "chk_gbn passed without packets: $note" ||
			t_pass "chk_gbn: no verdict without packets ($note)"
	fi
else
	t_fail "ibv_rc_pingpong pair"
fi
port=$(t_port)
if SOFTRNIC_LOG=debug t_pair bw 60 "ib_write_bw -d srn_lo -x 0 -F -p $port -s 65536 -n 5" \
	"ib_write_bw -d srn_lo -x 0 -F -p $port -s 65536 -n 5 127.0.0.1"; then
	note=$(chk_perf "$L" "$T_TMP/bw.client") && t_pass "chk_perf: $note" || t_fail "chk_perf: $note"
	# srn_lo's path MTU is 4096: over UDP the data goes in 4 KiB packets
	cp "$T_TMP/bw.client" "$L.hostlog"
	cat "$T_TMP/bw.server" >>"$L.hostlog"
	if [ "${SOFTRNIC_TRANSPORT:-}" = udp ]; then
		note=$(chk_mtu4096 "$L") && t_pass "chk_mtu4096: $note" || t_fail "chk_mtu4096: $note"
	fi
else
	t_fail "ib_write_bw pair"
fi
port=$(t_port)
if t_pair rp 60 "rping -s -a 127.0.0.1 -C 3 -V -v -S 100 -p $port" \
	"rping -c -a 127.0.0.1 -C 3 -V -v -S 100 -p $port"; then
	note=$(IO_RPING_COUNT=3 chk_rping "$L" "$T_TMP/rp.client") && t_pass "chk_rping: $note" ||
		t_fail "chk_rping: $note"
	note=$(IO_RPING_COUNT=4 chk_rping "$L" "$T_TMP/rp.client") && t_fail "chk_rping: 4 of 3 pings: $note" ||
		t_pass "chk_rping: fails with fewer pings than asked ($note)"
else
	t_fail "rping pair"
fi
port=$(t_port)
if t_pair st 60 "$STREAM -d srn_lo -g 0 -p $port" "$STREAM -d srn_lo -g 0 -p $port -m 1 127.0.0.1"; then
	cp "$T_TMP/st.server" "$L.host"
	cp "$T_TMP/st.client" "$L.guest"
	note=$(chk_stream "$L" "$T_TMP/st.client") && t_pass "chk_stream: $note" || t_fail "chk_stream: $note"
	sed -i 's/corrupt 0/corrupt 1/' "$L.host" "$L.guest"
	note=$(chk_stream "$L" "$T_TMP/st.client") && t_fail "chk_stream took a corrupt verdict: $note" ||
		t_pass "chk_stream: a verdict with corruption is not clean"
else
	t_fail "rc_stream_check pair"
fi
t_done
