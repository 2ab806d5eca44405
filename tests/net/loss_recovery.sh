#!/usr/bin/env bash
# RC loss recovery between two hosts: two network namespaces this test
# creates, joined by a veth pair (192.168.88.0/24, addresses only inside
# them), nftables in NA dropping 1% of the UDP datagrams to port 4791 at
# random.  Each case must complete; for the stream, what the client
# resent (req_retx_bytes) must stay within 3x what nftables dropped:
#  - ibv_rc_pingpong -c, 64 KiB x 300 (every byte checked; server in NB,
#    see run), selective
#    retransmission (SOFTRNIC_SELECTIVE_RETX=1 on both sides; no ratio
#    asserted: a lost message tail costs a timeout's resend of the window);
#  - the same with plain go-back-N (the congestion window bounds what a
#    loss costs; no ratio asserted: go-back-N resends what followed);
#  - ib_write_bw 64 KiB x 2000 with SR, the ratio asserted, throughput
#    printed (not asserted: this host is shared).
# Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
t_need ibv_rc_pingpong ib_write_bw nft
t_netns_up srnlr 192.168.88
t_netns_devs lr

ip netns exec "$NA" nft add table inet srnloss &&
	ip netns exec "$NA" nft add chain inet srnloss c '{ type filter hook input priority 0; }' &&
	ip netns exec "$NA" nft add rule inet srnloss c udp dport 4791 \
		numgen random mod 100 \< 1 counter drop || t_skip "nftables not usable"

# counter NAME FILE: the value of a softrnic counter in a debug log (the
# dump at device close), summed over the process's engines
counter() { awk -v n="$1" '$2 == n { s += $3 } END { print s + 0 }' "$2"; }
# bytes nftables dropped so far
dropped() {
	ip netns exec "$NA" nft list table inet srnloss |
		sed -n 's/.*counter packets [0-9]* bytes \([0-9]*\).*/\1/p'
}
nft_reset() { ip netns exec "$NA" nft reset counters table inet srnloss >/dev/null; }

# run NAME SR "ARGS" [swap]: server in NA, client in NB, bounded; 0 when
# both exit 0.  NB's process logs at debug (NAME.log: its counters; it is
# the one whose packets nftables drops); NAME.s / NAME.c hold stdout.
# swap: the server in NB, the client in NA.  ibv_rc_pingpong's client
# exits once it has the server's last message: the ACK for that message
# must not be the one dropped (its resend would find the QP gone, on any
# RC device), so the pingpong runs swapped, with that ACK going out of NA.
run() {
	local name=$1 sr=$2 args=$3 swap=${4:-} port spid srv cli
	local sns=$NA sdev=$DA sif=vA slog=$T_TMP/$name.slog cns=$NB cdev=$DB cif=vB clog=$T_TMP/$name.log to=192.168.88.1
	[ -n "$swap" ] && { sns=$NB sdev=$DB sif=vB slog=$T_TMP/$name.log cns=$NA cdev=$DA cif=vA clog=$T_TMP/$name.slog to=192.168.88.2; }
	port=$(t_port)
	SOFTRNIC_SELECTIVE_RETX=$sr SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=$sif=$sdev timeout -k 2 50 \
		ip netns exec "$sns" "$SOFTRNIC" run -- $args -d "$sdev" -p "$port" \
		>"$T_TMP/$name.s" 2>"$slog" &
	spid=$!
	sleep 0.5
	SOFTRNIC_SELECTIVE_RETX=$sr SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=$cif=$cdev timeout -k 2 50 \
		ip netns exec "$cns" "$SOFTRNIC" run -- $args -d "$cdev" -p "$port" $to \
		>"$T_TMP/$name.c" 2>"$clog"
	cli=$?
	wait $spid
	srv=$?
	[ $srv -eq 0 ] && [ $cli -eq 0 ] && return 0
	echo "  server exit $srv, client exit $cli:"
	tail -n 8 "$T_TMP/$name.s" "$T_TMP/$name.c" | sed 's/^/    | /'
	# each side's own lines and its engine's last words
	for f in "$T_TMP/$name.slog" "$T_TMP/$name.log"; do
		grep -v '^softrnic\[[0-9]*\]: [a-z_]* [0-9]*$' "$f" | tail -n 8 | sed "s|^|    ${f##*/} \| |"
	done
	return 1
}

# check NAME WHAT BOUND: the run's resent bytes against nftables' drops
check() {
	local name=$1 what=$2 bound=$3 lost retx
	lost=$(dropped) retx=$(counter req_retx_bytes "$T_TMP/$name.log")
	local msg="$what: lost $lost B, resent $retx B, $(counter comp_nak_seq "$T_TMP/$name.log") NAKs, $(counter req_timeouts "$T_TMP/$name.log") timeouts"
	if [ -z "$bound" ]; then
		t_pass "$msg"
	elif [ "$lost" -gt 0 ] && [ "$retx" -le $((bound * lost)) ]; then
		t_pass "$msg (<= ${bound}x)"
	else
		t_fail "$msg (want lost > 0, resent <= ${bound}x)"
	fi
}

nft_reset
if run pp_sr 1 "ibv_rc_pingpong -g 0 -c -s 65536 -n 300" swap; then
	# (ratio printed only: a ping-pong's lost tail is found by the ACK
	# timeout, which resends the window whatever little was lost)
	check pp_sr "SR ibv_rc_pingpong -c, data checked" ""
else
	t_fail "SR ibv_rc_pingpong -c at 1% loss"
fi

nft_reset
if run pp_gbn 0 "ibv_rc_pingpong -g 0 -c -s 65536 -n 300" swap; then
	check pp_gbn "go-back-N ibv_rc_pingpong -c, data checked" ""
else
	t_fail "go-back-N ibv_rc_pingpong -c at 1% loss"
fi

nft_reset
if run bw_sr 1 "ib_write_bw -x 0 -F -s 65536 -n 2000"; then
	check bw_sr "SR ib_write_bw $(awk '$1 == 65536 { print $4 }' "$T_TMP/bw_sr.c") MB/s" 3
else
	t_fail "SR ib_write_bw at 1% loss"
fi
t_done
