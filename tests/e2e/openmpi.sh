#!/usr/bin/env bash
# Debian's Open MPI 4.1 over UCX over softrnic, running tests/mpi/mpi_check
# (a ping-pong over sizes, an allreduce and an alltoall, every result
# checked by the ranks):
#  - 2 ranks on this host, through `softrnic run -- mpirun`;
#  - 4 ranks on two "hosts" (network namespaces the test creates, joined by
#    a veth pair whose addresses exist only inside them), 2 on each,
#    launched the way mpirun starts a job across machines: its remote-shell
#    launcher (plm_rsh_agent), here tests/mpi/netns-rsh. Root only.
# UCX may use only rc_verbs, ud_verbs and self (no shared memory, no TCP),
# and the test proves the job ran on softrnic: UCX's own transport report
# names rc_verbs on an srn device for each rank's endpoints, and softrnic's
# counters show the traffic.
. "$(dirname "$0")/../lib/e2e.sh"
t_need mpirun
MPI_CHECK="$SRN_BUILD/tests/mpi_check"
[ -x "$MPI_CHECK" ] || t_skip "tests/mpi_check not built (libopenmpi-dev missing at configure time)"
RSH="$SRN_SOURCE/tests/mpi/netns-rsh"

MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca pml ucx --mca osc ^ucx
	--mca btl ^openib,vader,tcp,ofi)
export UCX_TLS=rc_verbs,ud_verbs,self UCX_LOG_LEVEL=info SOFTRNIC_LOG=debug
export OMPI_MCA_btl_base_warn_component_unused=0
FWD=(-x UCX_TLS -x UCX_NET_DEVICES -x UCX_LOG_LEVEL -x SOFTRNIC_LOG)
[ -n "${SOFTRNIC_TRANSPORT:-}" ] && FWD+=(-x SOFTRNIC_TRANSPORT)

# counter NAME FILE: the sum of a softrnic counter over every process whose
# log is in FILE (each prints its counters when its device closes).
counter() { awk -v n="$2" '$2 == n { s += $3 } END { print s + 0 }' "$1"; }

# check_job LABEL OUT DEVICE RANKS: the job's results and its proof of path.
check_job() {
	local label=$1 out=$2 dev=$3 ranks=$4 eps
	if grep -q "mpi_check: all checked (0 errors over $ranks ranks)" "$out"; then
		t_pass "$label: $(grep -c '^pingpong' "$out") ping-pong sizes, allreduce, alltoall checked"
		grep -E '^pingpong +(4|65536|1048576) B' "$out" | sed 's/^/    /'
	else
		t_fail "$label: mpi_check results"
		sed 's/^/    | /' "$out" | grep -v 'softrnic\[' | tail -30
		return
	fi
	# UCX prints the transports of each endpoint configuration it uses.
	eps=$(grep -c "ep_cfg\[[0-9]*\]: tag(.*rc_verbs/$dev:1" "$out")
	if [ "$eps" -ge "$ranks" ] && ! grep -E "ep_cfg.*(tcp|posix|sysv|cma|xpmem|knem)/" "$out" >/dev/null; then
		t_pass "$label: UCX endpoints on rc_verbs/$dev:1 ($eps reports), no shared memory or TCP"
	else
		t_fail "$label: UCX endpoints on rc_verbs/$dev:1 ($eps reports)"
		grep "ep_cfg" "$out" | sed 's/^/    | /' | head -10
	fi
	local pkts direct
	pkts=$(counter "$out" tx_packets)
	direct=$(( $(counter "$out" direct_send) + $(counter "$out" direct_write) + $(counter "$out" direct_read) ))
	if [ $((pkts + direct)) -gt 0 ]; then
		t_pass "$label: softrnic carried it ($pkts packets, $direct same-host operations)"
	else
		t_fail "$label: softrnic counters show no traffic"
	fi
}

# --- one host, two ranks ------------------------------------------------------
export UCX_NET_DEVICES=srn_lo:1
out="$T_TMP/one-host.out"
timeout -k 5 240 "$SOFTRNIC" run -- "${MPIRUN[@]}" -np 2 "${FWD[@]}" "$MPI_CHECK" 100 4194304 \
	>"$out" 2>&1
echo "  one host: mpirun exit $?"
check_job "one host, 2 ranks" "$out" srn_lo 2

# --- two hosts, four ranks -----------------------------------------------------
# Between hosts traffic is packets on either path; SOFTRNIC_TRANSPORT=udp
# also turns off the hand-over of packets from the port-4791 engine to the
# host's other processes, so with 2 ranks per host only one would be
# reachable: the job runs on the default path only.
if [ "${SOFTRNIC_TRANSPORT:-}" = udp ]; then
	echo "  (two-host job: default path only)"
	t_done
	exit
fi
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
	echo "  (two-host job skipped: needs root for ip netns)"
	t_done
	exit
fi
NA="srnmpiA$$" NB="srnmpiB$$"
netns_down() { ip netns del "$NA" 2>/dev/null; ip netns del "$NB" 2>/dev/null; rm -rf "$T_TMP"; }
trap netns_down EXIT
# The same interface name on both hosts gives the same device name,
# srn_mpi0, so one UCX_NET_DEVICES fits every rank.
if ip netns add "$NA" && ip netns add "$NB" &&
   ip -n "$NA" link add mpi0 type veth peer name mpi0 netns "$NB" &&
   ip -n "$NA" addr add 192.168.78.1/24 dev mpi0 && ip -n "$NB" addr add 192.168.78.2/24 dev mpi0 &&
   ip -n "$NA" link set lo up && ip -n "$NB" link set lo up &&
   ip -n "$NA" link set mpi0 up && ip -n "$NB" link set mpi0 up; then
	:
else
	t_fail "two hosts: namespaces and veth"
	t_done
	exit
fi
export SOFTRNIC_DEVICES=mpi0 UCX_NET_DEVICES=srn_mpi0:1
export SRN_NETNS_HOSTS="192.168.78.1=$NA 192.168.78.2=$NB"
out="$T_TMP/two-hosts.out"
timeout -k 5 300 ip netns exec "$NA" "$SOFTRNIC" run -- "${MPIRUN[@]}" -np 4 \
	--host 192.168.78.1:2,192.168.78.2:2 --mca plm_rsh_agent "$RSH" \
	--mca oob_tcp_if_include 192.168.78.0/24 "${FWD[@]}" -x SOFTRNIC_DEVICES \
	"$MPI_CHECK" 50 1048576 >"$out" 2>&1
echo "  two hosts: mpirun exit $?"
check_job "two hosts, 4 ranks" "$out" srn_mpi0 4
# Ranks 2 and 3 run in the second namespace: their traffic to the first
# can only have gone as RoCE packets between the two stacks.
if grep -q "rank 3 of 4" "$out" && [ "$(counter "$out" rx_packets)" -gt 0 ]; then
	t_pass "two hosts: RoCE packets crossed the veth ($(counter "$out" rx_packets) received)"
else
	t_fail "two hosts: no RoCE packets received"
fi
t_done
