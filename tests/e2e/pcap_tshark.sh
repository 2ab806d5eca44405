#!/usr/bin/env bash
# SOFTRNIC_PCAP writes every packet sent and received; tshark's RoCE
# dissector must decode them (opcodes, PSNs, RETH) with no malformed packet.
# Same-host shared memory moves no packets: capture the RoCEv2 path.
export SOFTRNIC_TRANSPORT=udp
. "$(dirname "$0")/../lib/e2e.sh"
t_need tshark ib_write_bw
port=$(t_port)
spcap="$T_TMP/server.pcap" cpcap="$T_TMP/client.pcap"
SOFTRNIC_PCAP=$spcap timeout -k 2 60 "$SOFTRNIC" run -- ib_write_bw -d srn_lo -x 0 -F -p "$port" -s 65536 -n 5 >"$T_TMP/s.out" 2>&1 &
spid=$!
sleep 0.3
SOFTRNIC_PCAP=$cpcap timeout -k 2 60 "$SOFTRNIC" run -- ib_write_bw -d srn_lo -x 0 -F -p "$port" -s 65536 -n 5 127.0.0.1 >"$T_TMP/c.out" 2>&1
c=$?
wait $spid; s=$?
[ $c -eq 0 ] && [ $s -eq 0 ] && t_pass "ib_write_bw with SOFTRNIC_PCAP set" || { t_fail "ib_write_bw exit $s/$c"; cat "$T_TMP/c.out"; }

for f in "$cpcap" "$spcap"; do
	name=$(basename "$f")
	[ -s "$f" ] || { t_fail "$name written"; continue; }
	fields=$(tshark -r "$f" -d udp.port==4791,infiniband -Y infiniband -T fields \
		-e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.reth.va 2>/dev/null)
	n=$(printf '%s\n' "$fields" | grep -c .)
	[ "$n" -gt 0 ] && t_pass "$name: $n RoCE packets decoded" || t_fail "$name: no RoCE packets decoded"
	# WRITE_FIRST (6) or WRITE_ONLY (10) carry a RETH; ACKs (17) come back.
	printf '%s\n' "$fields" | awk '$1==6 || $1==10' | awk 'NF>=3' | grep -q . &&
		t_pass "$name: RDMA WRITE with RETH decoded" || t_fail "$name: no RETH decoded"
	printf '%s\n' "$fields" | awk '$1==17' | grep -q . &&
		t_pass "$name: ACKs decoded" || t_fail "$name: no ACK decoded"
	printf '%s\n' "$fields" | awk '$2 ~ /^[0-9]+$/' | grep -q . &&
		t_pass "$name: PSNs decoded" || t_fail "$name: no PSN"
	if tshark -r "$f" -d udp.port==4791,infiniband -V 2>/dev/null | grep -qi malformed; then
		t_fail "$name: tshark reports a malformed packet"
	else
		t_pass "$name: no malformed packets"
	fi
done
t_done
