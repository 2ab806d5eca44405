#!/usr/bin/env bash
# rdma_cm over IPv6 (::1), Debian's unmodified programs through softrnic:
# rping (-v -V: 20 pings verified on both sides, READ and WRITE), ucmatose
# (-b ::1 / -s ::1, 2 connections), udaddy (UD, SIDR over IPv6),
# rdma_server / rdma_client (-s ::1).  Refusals: an rping client with
# nobody listening on [::1] fails with REJECTED within 5 s; an rping
# server on fd00:dead::1 (no device has it) fails at rdma_bind_addr.  On
# the UDP path a capture of the rping server holds IPv6 frames ::1 -> ::1
# and no IPv4.  perftest's -R (4.5-0.17) resolves the server name as IPv4
# only (getaddrinfo with AF_INET): with ::1 it stops before rdma_cm, so it
# is not run here (docs/ipv6.md).
. "$(dirname "$0")/../lib/e2e.sh"
t_need rping ucmatose udaddy rdma_server rdma_client

port=$(t_port)
pcap=""
[ "${SOFTRNIC_TRANSPORT:-}" = udp ] && pcap=$T_TMP/rping6.pcap
if SOFTRNIC_PCAP=$pcap t_pair rping 30 "rping -s -a ::1 -p $port -v -V -C 20" \
	"rping -c -a ::1 -p $port -v -V -C 20"; then
	c=$(grep -c "^ping data: rdma-ping-" "$T_TMP/rping.client")
	s=$(grep -c "^server ping data: rdma-ping-" "$T_TMP/rping.server")
	if [ "$c" -eq 20 ] && [ "$s" -eq 20 ]; then
		t_pass "rping -a ::1 -C 20: 20 pings verified on both sides"
	else
		t_fail "rping -a ::1: client saw $c, server $s of 20 pings"
	fi
else
	t_fail "rping -a ::1 -C 20"
fi
if [ -n "$pcap" ]; then
	counts=$(python3 "$SRN_SOURCE/tests/lib/pcap_families.py" "$pcap" 2>&1)
	v6=$(echo "$counts" | sed -n 's/.*loop6=\([0-9]*\).*/\1/p')
	v4=$(echo "$counts" | sed -n 's/.*ipv4=\([0-9]*\).*/\1/p')
	# 20 pings: per ping a SEND, READ, SEND, WRITE and their answers
	if [ "${v6:-0}" -ge 80 ] && [ "${v4:-1}" -eq 0 ]; then
		t_pass "capture of the rping server over UDP: $counts"
	else
		t_fail "capture of the rping server over UDP: $counts"
	fi
fi

# pair_ok NAME SECS "SERVER" "CLIENT" CLIENT_PATTERN SERVER_PATTERN LABEL:
# both exit 0 and each output holds its pattern.
pair_ok() {
	if t_pair "$1" "$2" "$3" "$4" && grep -q "$5" "$T_TMP/$1.client" &&
	   grep -q "$6" "$T_TMP/$1.server"; then
		t_pass "$7"
	else
		t_fail "$7"
	fi
}

port=$(t_port)
pair_ok ucma 60 "ucmatose -b ::1 -p $port -c 2 -C 10" "ucmatose -s ::1 -p $port -c 2 -C 10" \
	"data transfers complete" "test complete" \
	"ucmatose -b ::1 / -s ::1, 2 connections x 10 messages"
# udaddy has no port option (7174 always): one at a time host-wide.
pair_ok udaddy 30 "udaddy -b ::1" "udaddy -s ::1" "data transfers complete" "return status 0" \
	"udaddy -b ::1 / -s ::1 (UD, address resolution by SIDR over IPv6)"
port=$(t_port)
pair_ok rdmasc 30 "rdma_server -s ::1 -p $port" "rdma_client -s ::1 -p $port" \
	"rdma_client: end 0" "rdma_server: end 0" "rdma_server -s ::1 / rdma_client -s ::1"

# Nobody listens: REJECTED (Linux's invalid service id), promptly.
port=$(t_port)
t0=$(date +%s%N)
timeout -k 2 30 "$SOFTRNIC" run -- rping -c -a ::1 -p "$port" -C 1 -v >"$T_TMP/nolisten" 2>&1
st=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $st -ne 0 ] && [ $st -ne 124 ] && [ $ms -lt 5000 ] && grep -q "REJECTED" "$T_TMP/nolisten"; then
	t_pass "rping -c -a ::1 with no server: REJECTED after $ms ms"
else
	t_fail "rping -c -a ::1 with no server: exit $st after $ms ms"
	sed 's/^/    | /' "$T_TMP/nolisten" | tail -5
fi

# An address no device has: the bind fails (EADDRNOTAVAIL), nothing waits.
timeout -k 2 10 "$SOFTRNIC" run -- rping -s -a fd00:dead::1 -p "$(t_port)" -C 1 >"$T_TMP/nodev" 2>&1
st=$?
if [ $st -ne 0 ] && [ $st -ne 124 ] && grep -qi "bind.*\(cannot assign\|-1\|99\)" "$T_TMP/nodev"; then
	t_pass "rping -s -a fd00:dead::1: $(grep -i bind "$T_TMP/nodev" | head -1)"
else
	t_fail "rping -s -a fd00:dead::1: exit $st"
	sed 's/^/    | /' "$T_TMP/nodev" | tail -5
fi
t_done
