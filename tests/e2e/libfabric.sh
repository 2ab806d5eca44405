#!/usr/bin/env bash
# libfabric 1.17's verbs provider (Debian's libfabric-bin: fi_info,
# fi_pingpong) over softrnic.  fi_pingpong -c (every message checked) runs
# server and client with several sizes for
#   -p verbs -e msg           (RC through rdma_cm)
#   -p 'verbs;ofi_rxm' -e rdm (RxM over those RC connections)
#   -p verbs -e dgram         (UD)
# FI_EP_DGRAM needs no address of rdma_cm's and runs on srn_lo.  libfabric
# makes no FI_EP_MSG domain for a loopback interface (prov/verbs/src/
# verbs_info.c, vrb_getifaddrs: IFF_LOOPBACK is skipped, and FI_VERBS_IFACE
# cannot bring it back), so msg and rdm run as a user would run them
# between hosts: in a network namespace this test creates, whose veth end
# (192.168.86.1) is not loopback; both processes there share a host, so the
# default run takes the same-host path and udp/ the RoCEv2 one.  Then once
# each from a second namespace (192.168.86.2), over UDP between "hosts".
# In the namespaces softrnic's devices are the veth ends only
# (SOFTRNIC_DEVICES): with srn_lo present, libfabric's "localhost" probe
# binds 127.0.0.1, which attaches srn_lo, and it then keeps srn_lo's domains
# only (README, known problems).  The namespaces need root: without it the
# dgram part runs and the test skips (77).  Every run is bounded by timeout; a trap removes both
# namespaces.
. "$(dirname "$0")/../lib/e2e.sh"
t_need fi_pingpong fi_info

NSA=() NSB=()
# pp LABEL SERVER_NS CLIENT_NS DEST "ARGS": fi_pingpong server and client,
# ARGS for both, the client to DEST; the client's rows must show every
# message acknowledged.
pp() {
	local label=$1 sns=$2 cns=$3 dest=$4 args=$5 port spid srv cli rows
	local -a sx=() cx=()
	[ "$sns" = A ] && sx=("${NSA[@]}")
	[ "$cns" = A ] && cx=("${NSA[@]}")
	[ "$cns" = B ] && cx=(env SOFTRNIC_DEVICES=vB "${NSB[@]}")
	port=$(t_port)
	timeout -k 2 40 "${sx[@]}" "$SOFTRNIC" run -- fi_pingpong $args -c -B "$port" \
		>"$T_TMP/pp.server" 2>&1 &
	spid=$!
	for _ in $(seq 50); do
		"${sx[@]}" ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break
		sleep 0.1
	done
	timeout -k 2 40 "${cx[@]}" "$SOFTRNIC" run -- fi_pingpong $args -c -P "$port" "$dest" \
		>"$T_TMP/pp.client" 2>&1
	cli=$?
	wait $spid
	srv=$?
	rows=$(grep -E '^[0-9]+[kmg]? +[0-9]+[kmg]? +=[0-9]+' "$T_TMP/pp.client")
	if [ $srv -eq 0 ] && [ $cli -eq 0 ] && [ -n "$rows" ]; then
		t_pass "$label: fi_pingpong $args -c: $(echo "$rows" | tr -s ' ' | head -1)"
	else
		t_fail "$label: fi_pingpong $args -c (server exit $srv, client exit $cli)"
		sed 's/^/    server | /' "$T_TMP/pp.server" | tail -30
		sed 's/^/    client | /' "$T_TMP/pp.client" | tail -30
	fi
}

# Domain names fi_info lists for provider $1 and endpoint type $2.
domains() {
	"$@" 2>/dev/null | sed -n 's/^ *domain: //p' | sort -u | tr '\n' ' '
}

# On this host, srn_lo: FI_EP_DGRAM (its messages are up to the MTU).
d=$(domains timeout 20 "$SOFTRNIC" run -- fi_info -p verbs -t FI_EP_DGRAM)
case " $d " in
*" srn_lo-dgram "*) t_pass "fi_info -p verbs -t FI_EP_DGRAM lists srn_lo-dgram ($d)" ;;
*) t_fail "fi_info -p verbs -t FI_EP_DGRAM lists srn_lo-dgram (got: $d)" ;;
esac
for s in 1 1024 4096; do
	pp "srn_lo" host host 127.0.0.1 "-p verbs -e dgram -d srn_lo-dgram -S $s -I 200"
done

if [ "$(id -u)" -ne 0 ]; then
	t_done || exit 1
	t_skip "msg and rdm need network namespaces (root)"
fi
t_need ip ss
. "$(dirname "$0")/../lib/netns.sh"
t_netns_up srnfi 192.168.86
NSA=(env SOFTRNIC_DEVICES=vA ip netns exec "$NA")
NSB=(ip netns exec "$NB")

d=$(domains timeout 20 "${NSA[@]}" "$SOFTRNIC" run -- fi_info -p verbs -t FI_EP_MSG)
[ "$d" = "srn_vA " ] && t_pass "fi_info -p verbs -t FI_EP_MSG in the namespace: srn_vA only ($d)" ||
	t_fail "fi_info -p verbs -t FI_EP_MSG in the namespace: srn_vA only (got: $d)"
d=$(domains timeout 20 "${NSA[@]}" "$SOFTRNIC" run -- fi_info -p 'verbs;ofi_rxm' -t FI_EP_RDM)
[ "$d" = "srn_vA " ] && t_pass "fi_info -p 'verbs;ofi_rxm' -t FI_EP_RDM: srn_vA ($d)" ||
	t_fail "fi_info -p 'verbs;ofi_rxm' -t FI_EP_RDM: srn_vA (got: $d)"
# With no type given, the localhost probe must not prune srn_vA's domains.
d=$(domains timeout 20 "${NSA[@]}" "$SOFTRNIC" run -- fi_info -p verbs)
[ "$d" = "srn_vA srn_vA-dgram " ] &&
	t_pass "fi_info -p verbs in the namespace: $d" ||
	t_fail "fi_info -p verbs in the namespace: srn_vA srn_vA-dgram (got: $d)"

for s in 1 4096 65536 1048576; do
	pp "one host" A A 192.168.86.1 "-p verbs -e msg -d srn_vA -S $s -I 100"
done
for s in 1 4096 65536 1048576; do
	pp "one host" A A 192.168.86.1 "-p verbs;ofi_rxm -e rdm -d srn_vA -S $s -I 100"
done
for s in 1 512 1024; do
	pp "one host" A A 192.168.86.1 "-p verbs -e dgram -d srn_vA-dgram -S $s -I 200"
done

# Two hosts: srn_vA and srn_vB.
pp "two hosts" A B 192.168.86.1 "-p verbs -e msg -S 65536 -I 100"
pp "two hosts" A B 192.168.86.1 "-p verbs;ofi_rxm -e rdm -S 65536 -I 100"
pp "two hosts" A B 192.168.86.1 "-p verbs -e dgram -S 1024 -I 100"
t_done
