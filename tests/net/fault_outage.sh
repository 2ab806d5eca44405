#!/usr/bin/env bash
# A 2 s outage in the middle of an RC stream between two hosts: two
# network namespaces this test creates, joined by a veth pair
# (192.168.94.0/24, addresses only inside them).  rc_stream_check, paced
# so that it runs before, through and after the outage, moves checked
# SENDs and WRITEs; 1 s in, nftables drops everything NA and NB receive
# for 2 s.  The stream must span the outage (packets dropped, client
# still running when it ends) and complete intact: QP timeout 18 (1.07 s)
# and retry_cnt 7 outlast 2 s whether 7 means for ever or 7 retries.
# FAULT_LONG=1 moves 256 MiB.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/fault.sh"
fault_direct fo 192.168.94
MIB=$(fault_mib 12)

fault_nft
fault_stream clean "$(fault_secs 40)" "-t rc -o mix -m $MIB" && t_pass "clean: $(fault_mbs clean) MB/s" ||
	t_fail "clean path"
fault_row "RC, clean veth" clean "$MIB" "$(fault_mbs clean)" "$(fault_mbs clean)" 0

fault_through out "2 s outage" "fault_nft counter drop" fault_nft 2
[ "$F_DROPPED" -gt 0 ] && t_pass "the outage dropped $F_DROPPED packets" ||
	t_fail "the outage dropped nothing"
t_done
