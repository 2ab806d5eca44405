#!/usr/bin/env bash
# RC under random loss between two hosts: two network namespaces this
# test creates, joined by a veth pair (192.168.91.0/24, addresses only
# inside them), nftables dropping RoCEv2 datagrams at random in both
# directions (numgen random, 0.1%, 1% and 10%).  rc_stream_check moves
# SENDs and WRITEs with immediate, every byte checked, exactly once and
# in order; each case must complete intact.  Rate, retransmissions and
# NAKs are printed next to the clean path of the same run (fault_row:
# scripts/fault_bench.sh gathers them), and ib_write_bw and ib_send_bw
# give the raw rate clean and at 1%.  Sizes are short in make check (10%
# loss is slow with go-back-N); FAULT_LONG=1 moves 256 MiB each.  Root
# only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/fault.sh"
fault_direct fl 192.168.91

# case NAME LABEL PERMILLE MIB[:slow] SECS
case_loss() {
	local name=$1 label=$2 pm=$3 mib secs
	mib=$(fault_mib ${4/:/ }); secs=$(fault_secs "$5")
	fault_loss "$pm"
	if fault_stream "$name" "$secs" "-t rc -o mix -m $mib"; then
		t_pass "$label: $mib MiB intact, $(fault_mbs "$name") MB/s, $(fault_nft_dropped) datagrams dropped"
	else
		t_fail "$label: $mib MiB"
	fi
	fault_row "RC, $label loss" "$name" "$mib" "$(fault_mbs "$name")" "$CLEAN" "$(fault_nft_dropped)"
}

fault_loss 0
fault_stream clean "$(fault_secs 40)" "-t rc -o mix -m $(fault_mib 16)" &&
	t_pass "clean: $(fault_mbs clean) MB/s" || t_fail "clean path"
CLEAN=$(fault_mbs clean)
fault_row "RC, clean veth" clean "$(fault_mib 16)" "$CLEAN" "$CLEAN" 0
case_loss l1 0.1% 1 16 40
case_loss l10 1% 10 16 40
case_loss l100 10% 100 1:slow 40

# perftest's raw rate, no data checked: clean and at 1%
n=$([ "$FAULT_LONG" = 1 ] && echo 4096 || echo 200)
for prog in ib_write_bw ib_send_bw; do
	command -v $prog >/dev/null || continue
	for pm in 0 10; do
		fault_loss "$pm"
		if fault_perftest "$prog$pm" "$(fault_secs 60)" "$prog -x 0 -F -s 65536 -n $n"; then
			t_pass "$prog 64 KiB x $n, $pm per mille loss: $(fault_perftest_mbs "$prog$pm") MB/s,\
 $(fault_nft_dropped) dropped"
		else
			t_fail "$prog at $pm per mille loss"
		fi
		fault_row "$prog, $pm per mille loss" "$prog$pm" $((n / 16)) "$(fault_perftest_mbs "$prog$pm")" \
			"$(fault_perftest_mbs "${prog}0")" "$(fault_nft_dropped)"
	done
done
t_done
