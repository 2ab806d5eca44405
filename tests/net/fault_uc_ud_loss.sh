#!/usr/bin/env bash
# UC and UD under random loss between two hosts: two network namespaces
# this test creates, joined by a veth pair (192.168.93.0/24, addresses
# only inside them), nftables dropping RoCEv2 datagrams at random (1% and
# 10%).  rc_stream_check sends checked messages (UC 4 KiB: 4 packets
# each; UD 1 KiB: one): messages may be lost, but none delivered may be
# corrupted, delivered twice, or (UC) out of order, and at least a share
# must arrive (50% at 1% and on the clean path, run first for the rates;
# 10% at 10%: a receiver late by 20 ms on this shared host loses
# messages too).  FAULT_LONG=1 moves 256 MiB each.
# Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/fault.sh"
fault_direct fu 192.168.93

# case NAME LABEL PERMILLE "ARGS" MIN_PCT (NAME: uc or ud and the per
# mille lost, beside uc0 or ud0, the clean path)
case_lossy() {
	local name=$1 label=$2 pm=$3 args=$4 min=$5 mib
	mib=$(fault_mib 16)
	fault_loss "$pm"
	if fault_stream "$name" "$(fault_secs 40)" "$args -m $mib -L $min"; then
		t_pass "$label: $(sed -n 's/^client: [a-z]* send, //p' "$T_TMP/$name.client" | cut -d, -f1-3),\
 $(fault_mbs "$name") MB/s, $(fault_nft_dropped) dropped"
	else
		t_fail "$label"
	fi
	fault_row "$label" "$name" "$mib" "$(fault_mbs "$name")" "$(fault_mbs "${name%%[0-9]*}0")" \
		"$(fault_nft_dropped)"
}

case_lossy uc0 "UC, clean veth" 0 "-t uc -o send -s 4096" 50
case_lossy uc10 "UC, 1% loss" 10 "-t uc -o send -s 4096" 50
case_lossy uc100 "UC, 10% loss" 100 "-t uc -o send -s 4096" 10
case_lossy ud0 "UD, clean veth" 0 "-t ud -o send -s 1024" 50
case_lossy ud10 "UD, 1% loss" 10 "-t ud -o send -s 1024" 50
case_lossy ud100 "UD, 10% loss" 100 "-t ud -o send -s 1024" 10
t_done
