#!/usr/bin/env bash
# RC WRITE throughput under random loss between two network namespaces
# this script creates (veth, 192.168.87.0/24, addresses only inside them):
# ib_write_bw 64 KiB from NB to NA, nftables dropping LOSS% of the UDP
# datagrams NA receives on port 4791.  Prints, per run: loss, MB/s, bytes
# nftables dropped, and the client's retransmission counters.  Root only.
#
#   bench/loss_recovery.sh [-b BUILD] [-n ITERS] [-r REPS] [-s] LOSS...
#
# -s: SOFTRNIC_SELECTIVE_RETX=1 on both sides (selective retransmission).
# Also `-l`: the same-host UDP path on 127.0.0.1 instead (no loss).
set -u
BUILD=$(cd "$(dirname "$0")/../build" && pwd)
ITERS=3000 REPS=1 LO=0 SR=0
while getopts b:n:r:ls o; do
	case $o in
	b) BUILD=$(cd "$OPTARG" && pwd) ;;
	n) ITERS=$OPTARG ;;
	r) REPS=$OPTARG ;;
	l) LO=1 ;;
	s) SR=1 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
export SOFTRNIC_SELECTIVE_RETX=$SR
SRN="$BUILD/bin/softrnic"
[ -x "$SRN" ] || { echo "no $SRN" >&2; exit 2; }
TMP=$(mktemp -d /tmp/srn-loss.XXXXXX)
NA=srnlrA$$ NB=srnlrB$$ DA=srn_lr$$a DB=srn_lr$$b
cleanup() {
	ip netns del "$NA" 2>/dev/null
	ip netns del "$NB" 2>/dev/null
	rm -f /dev/shm/softrnic-"$DA"-* /dev/shm/softrnic-"$DB"-*
	rm -rf "$TMP"
}
trap cleanup EXIT

# counter NAME FILE: the value softrnic's counter dump (SOFTRNIC_LOG=debug,
# at exit) gives NAME, summed over the process's engines; 0 if absent.
counter() { awk -v n="$2" '$2 == n { s += $3 } END { print s + 0 }' "$1"; }
# the MB/s column of ib_write_bw's result line
bw() { awk '$1 == 65536 { print $4 }' "$1" | tail -1; }

report() {
	local tag=$1 cl=$2 dropped=$3
	printf '%-8s %8s MB/s  lost %10s B  retx %10s B (%s pkts)  win %s  nak_tx %s nak_rx %s timeouts %s sr_resends %s\n' \
		"$tag" "$(bw "$cl")" "$dropped" \
		"$(counter "$cl.log" req_retx_bytes)" "$(counter "$cl.log" req_retx_packets)" \
		"$(counter "$cl.log" req_cwnd)" "$(counter "$TMP/s.log" resp_nak_seq)" \
		"$(counter "$cl.log" comp_nak_seq)" "$(counter "$cl.log" req_timeouts)" \
		"$(counter "$cl.log" sr_resends)"
}

if [ "$LO" = 1 ]; then
	for r in $(seq "$REPS"); do
		port=$((20000 + RANDOM % 12000))
		SOFTRNIC_TRANSPORT=udp SOFTRNIC_LOG=debug timeout -k 2 120 "$SRN" run -- \
			ib_write_bw -x 0 -F -s 65536 -n "$ITERS" -p $port >"$TMP/s" 2>"$TMP/s.log" &
		sp=$!
		sleep 0.5
		SOFTRNIC_TRANSPORT=udp SOFTRNIC_LOG=debug timeout -k 2 120 "$SRN" run -- \
			ib_write_bw -x 0 -F -s 65536 -n "$ITERS" -p $port 127.0.0.1 \
			>"$TMP/c" 2>"$TMP/c.log"
		wait $sp
		report "lo#$r" "$TMP/c" 0
	done
	exit 0
fi

[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 77; }
ip netns add "$NA" && ip netns add "$NB" || exit 1
ip -n "$NA" link add vA type veth peer name vB netns "$NB"
ip -n "$NA" addr add 192.168.87.1/24 dev vA
ip -n "$NB" addr add 192.168.87.2/24 dev vB
for n in "$NA" "$NB"; do ip -n "$n" link set lo up; done
ip -n "$NA" link set vA up
ip -n "$NB" link set vB up

for loss in "$@"; do
	for r in $(seq "$REPS"); do
		ip netns exec "$NA" nft delete table inet srnloss 2>/dev/null
		if [ "$loss" != 0 ]; then
			ip netns exec "$NA" nft add table inet srnloss
			ip netns exec "$NA" nft add chain inet srnloss c '{ type filter hook input priority 0; }'
			ip netns exec "$NA" nft add rule inet srnloss c udp dport 4791 \
				numgen random mod 1000 \< $((loss * 10)) counter drop
		fi
		port=$((20000 + RANDOM % 12000))
		SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA=$DA timeout -k 2 300 ip netns exec "$NA" \
			"$SRN" run -- ib_write_bw -x 0 -F -s 65536 -n "$ITERS" -d $DA -p $port \
			>"$TMP/s" 2>"$TMP/s.log" &
		sp=$!
		sleep 0.5
		SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vB=$DB timeout -k 2 300 ip netns exec "$NB" \
			"$SRN" run -- ib_write_bw -x 0 -F -s 65536 -n "$ITERS" -d $DB -p $port \
			192.168.87.1 >"$TMP/c" 2>"$TMP/c.log"
		crc=$?
		wait $sp
		dropped=0
		[ "$loss" != 0 ] && dropped=$(ip netns exec "$NA" nft list table inet srnloss |
			sed -n 's/.*counter packets [0-9]* bytes \([0-9]*\).*/\1/p')
		[ $crc -eq 0 ] || echo "(client exit $crc)"
		report "ns${loss}%#$r" "$TMP/c" "$dropped"
	done
done
