#!/usr/bin/env bash
# Many QPs streaming into one receiving socket: ib_write_bw -q 8 -s 1 MiB.
# Each QP's window alone fills the receiver's socket buffer; before the
# requesters shared one window (transport/requester.c, "Shared window")
# eight of them overran it on the UDP path and recovered by go-back-N
# (comp_nak_seq in the client's counters, resp_nak_seq in the server's)
# and ACK timeouts.  Checks: the run completes, and no packet was lost at
# the receiving socket (no sequence NAK on either side).
. "$(dirname "$0")/../lib/e2e.sh"
t_need ib_write_bw
export SOFTRNIC_LOG=debug
port=$(t_port)
common="-d srn_lo -x 0 -F -p $port -q 8 -s 1048576 -n 100"
if t_pair many$port 120 "ib_write_bw $common" "ib_write_bw $common 127.0.0.1" &&
   grep -qE '^ +1048576 +[0-9]+ +[0-9.]+ +[0-9.]+' "$T_TMP/many$port.client"; then
	t_pass "ib_write_bw -q 8 -s 1 MiB -n 100 ($(grep -E '^ +1048576 +[0-9]+ +[0-9.]+ +[0-9.]+' "$T_TMP/many$port.client" | awk '{print $4}') MB/s)"
else
	t_fail "ib_write_bw -q 8 -s 1 MiB -n 100"
fi
naks=$(cat "$T_TMP/many$port.client" "$T_TMP/many$port.server" |
	awk '/: (comp_nak_seq|resp_nak_seq) [0-9]+$/ { n += $NF } END { print n + 0 }')
timeouts=$(awk '/: req_timeouts [0-9]+$/ { n += $NF } END { print n + 0 }' "$T_TMP/many$port.client")
echo "       sequence NAKs $naks, ACK timeouts $timeouts"
if [ "$naks" -eq 0 ]; then
	t_pass "no packet lost at the receiving socket (no sequence NAK)"
else
	t_fail "no packet lost at the receiving socket: $naks sequence NAKs"
fi
t_done
