#!/usr/bin/env bash
# Writes OUT/latest.md and latest.png (bench/plot.sh) from the samples
# that bench/run.sh collected in $RAW/samples.tsv (medians of the
# repetitions).  Run by bench/run.sh; can be re-run alone on the same raw
# directory (OUT defaults to $BENCH_OUT, else build/bench-results):
#   SRC=. OUT=build/bench-results PATHS="default udp" SAME_PATH=0 bench/report.sh
set -u
SRC=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
OUT=${OUT:-${BENCH_OUT:-$SRC/build/bench-results}}
RAW=${RAW:-$OUT/raw}
PATHS=${PATHS:-udp}
SAME_PATH=${SAME_PATH:-1}
REPS=${REPS:-3}
BW_SIZES=${BW_SIZES:-8 64 512 4096 65536 1048576 8388608}
. "$SRC/bench/lib.sh"
MD=$OUT/latest.md
PNG=$OUT/latest.png

# The default path's keys ("udp" while both paths are one).
if [ "$SAME_PATH" = 1 ]; then DEF=udp; else DEF=default; fi

fmt() { [ -n "$1" ] && printf '%s' "$1" || printf '—'; }
hsize() { # bytes -> 8 B, 64 KiB, 1 MiB
	awk -v b="$1" 'BEGIN { if (b >= 1048576 && b % 1048576 == 0) printf "%d MiB", b / 1048576;
		else if (b >= 1024 && b % 1024 == 0) printf "%d KiB", b / 1024; else printf "%d B", b }'
}
# verdict VALUE OP LIMIT -> met / NOT met / not measured
verdict() {
	[ -n "$1" ] || { echo "not measured"; return; }
	awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN {
		ok = (op == ">=") ? v >= l : (op == "<=") ? v <= l : (op == ">") ? v > l : v < l;
		print ok ? "**met**" : "NOT met" }'
}
pathlabel() { # PATH -> column label
	if [ "$SAME_PATH" = 1 ]; then echo "default = udp"; else echo "$1"; fi
}

# One target row: NAME SOFTRNIC_VALUE UNIT BASELINE_NAME BASELINE_VALUE OP LIMIT [inverse]
target_row() {
	local name=$1 v=$2 unit=$3 bname=$4 bv=$5 op=$6 lim=$7 r
	r=$(b_ratio "$v" "$bv")
	echo "| $name | $(fmt "$v") $unit | $bname: $(fmt "$bv") $unit | $(fmt "$r") | $op $lim | $(verdict "$r" "$op" "$lim") |"
}

{
echo "# softrnic benchmark: latest run"
echo
echo "Written by \`make bench\` (bench/run.sh) on $(date -u '+%Y-%m-%d %H:%M UTC'); every figure is the"
echo "median of $REPS run(s) in this same run. GB/s = 10^9 bytes/s (perftest and UCX report MiB/s:"
echo "converted). Latencies are one-way (half the round trip) except READ and ATOMIC: full round trips."
echo
echo "## Machine"
echo
echo "| fact | value |"
echo "|---|---|"
echo "| CPU | $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo) |"
echo "| nproc | $(nproc) |"
echo "| kernel | $(uname -r) |"
echo "| OS | $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") |"
echo "| softrnic | $(cd "$SRC" && git describe --always --dirty 2>/dev/null || echo unknown) |"
echo "| perftest | $(dpkg-query -W -f='${Version}' perftest 2>/dev/null) |"
echo "| load before the run | $(cut -d' ' -f1-3 /proc/loadavg) |"
echo "| run time | $(cat "$RAW/elapsed" 2>/dev/null || echo '?') s |"
echo
if [ "$SAME_PATH" = 1 ]; then
	echo "**Transport paths:** the default path and \`SOFTRNIC_TRANSPORT=udp\` are the same today (the"
	echo "library does not read SOFTRNIC_TRANSPORT), so they were measured once; the same-host targets"
	echo "below are judged on the UDP path until the shared-memory path lands."
	echo
fi

# --- Targets ------------------------------------------------------------
# The GSO->GRO ceiling: the better of the paced and unpaced medians.
gso_p=$(b_med base:gso 65536); gso_u=$(b_med base:gso_unpaced 65536)
gso=$(awk -v a="$gso_p" -v b="$gso_u" 'BEGIN { if (a == "" && b == "") exit; printf "%.4g", (a + 0 > b + 0) ? a : b }')
ucx_bw=$(b_med base:ucx_sm:put_bw 1048576)
memcpy_1m=$(b_med base:memcpy 1048576)
ucx_lat=$(b_med base:ucx_sm:put_lat 2)
shm_pp=$(b_med base:shm_pp 2)
if [ -n "$ucx_bw" ]; then bw_ref="UCX ucp_put_bw (sm)"; bw_ref_v=$ucx_bw; else bw_ref="memcpy (no UCX)"; bw_ref_v=$memcpy_1m; fi
if [ -n "$ucx_lat" ]; then lat_ref="UCX ucp_put_lat (sm)"; lat_ref_v=$ucx_lat; else lat_ref="shm ping-pong (no UCX)"; lat_ref_v=$shm_pp; fi
echo "## Targets (issue 6)"
echo
echo "| target | softrnic | baseline (same run) | ratio | goal | status |"
echo "|---|---|---|---|---|---|"
target_row "same host ($(pathlabel default)): 1 MiB RDMA WRITE bandwidth" "$(b_med "srn:$DEF:write_bw" 1048576)" "GB/s" "$bw_ref" "$bw_ref_v" ">=" 0.8
target_row "same host ($(pathlabel default)): 2 B SEND latency, both polling" "$(b_med "srn:$DEF:send_lat" 2)" "us" "$lat_ref" "$lat_ref_v" "<=" 1.5
target_row "same host ($(pathlabel default)): 2 B WRITE latency, target polls memory" "$(b_med "srn:$DEF:write_lat" 2)" "us" "$lat_ref" "$lat_ref_v" "<=" 3
target_row "UDP path: 64 KiB RDMA WRITE bandwidth vs GSO->GRO" "$(b_med srn:udp:write_bw 65536)" "GB/s" "UDP GSO->GRO" "$gso" ">=" 0.6
target_row "UDP path: 64 KiB RDMA WRITE bandwidth vs TCP" "$(b_med srn:udp:write_bw 65536)" "GB/s" "iperf3 TCP" "$(b_med base:tcp 0)" ">" 2
target_row "UDP path: 2 B SEND latency" "$(b_med srn:udp:send_lat 2)" "us" "UDP ping-pong (busy-poll)" "$(b_med base:udp_pp 2)" "<=" 1.3
idle=$(b_med "srn:$DEF:idle" 0)
echo "| idle: RC QP pair open, no traffic ($(pathlabel default)) | $(fmt "$idle") % CPU | — | — | <= 1 % | $(verdict "$idle" "<=" 1) |"
echo
echo "Same-host references also measured: memcpy 1 MiB $(fmt "$memcpy_1m") GB/s, process_vm_writev 1 MiB"
echo "$(fmt "$(b_med base:vm_writev 1048576)") GB/s, shared-memory ping-pong 2 B $(fmt "$shm_pp") us, libfabric shm"
echo "(fi_pingpong) 2 B $(fmt "$(b_med base:fi_shm:lat 2)") us and 1 MiB ping-pong $(fmt "$(b_med base:fi_shm:bw 1048576)") GB/s;"
echo "UDP path 2 B WRITE latency $(fmt "$(b_med srn:udp:write_lat 2)") us."
echo
# What RoCE itself costs over plain UDP, measured in the same run: the UDP
# targets compare with baselines that skip it.
pp=$(b_med base:udp_pp 2); pp_ack=$(b_med base:udp_pp_ack 2); gso_icrc=$(b_med base:gso_icrc 65536)
pp_ackm=$(b_med base:udp_pp_ackm 2)
echo "Floors of the protocol, same run: every RC message needs an ACK back before perftest's latency"
echo "tests post the next one, so a UDP ping-pong whose messages each leave with an ACK (two 20-byte"
echo "datagrams in one GSO send, GRO on receive) takes $(fmt "$pp_ack") us one way, $(fmt "$(b_ratio "$pp_ack" "$pp")") x the plain"
echo "ping-pong, before any RoCE processing. A RoCE receiver must also ask each receive for the"
echo "sender's address and port (the ICRC covers them) and the GRO segment size (to split the buffer"
echo "into packets): with that, $(fmt "$pp_ackm") us, $(fmt "$(b_ratio "$pp_ackm" "$pp")") x the plain ping-pong (softrnic:"
echo "$(fmt "$(b_ratio "$(b_med srn:udp:send_lat 2)" "$pp_ackm")") x that floor). Every RoCEv2"
echo "packet carries an ICRC both ends compute: GSO->GRO with a CRC-32 per datagram on both ends"
echo "moves $(fmt "$gso_icrc") GB/s, $(fmt "$(b_ratio "$gso_icrc" "$gso")") x the plain ceiling (softrnic: $(fmt "$(b_ratio "$(b_med srn:udp:write_bw 65536)" "$gso_icrc")") x that floor)."
echo

# --- Middleware -------------------------------------------------------------
echo "## Middleware over softrnic (issue 21)"
echo
echo "UCX's ucx_perftest with \`UCX_TLS=rc_v\` (rc_verbs, with ud_verbs for connection setup) on srn_lo,"
echo "each beside UCX's own transport in the same repetition; Open MPI 4.1 with pml ucx over softrnic"
echo "beside Open MPI's TCP btl, 2 ranks of tests/mpi/mpi_check on this host (its fast mode: each size's last"
echo "exchange checked, so the time is the transport's, not the byte-by-byte check's)."
echo
echo "| target | softrnic | baseline (same run) | ratio | goal | status |"
echo "|---|---|---|---|---|---|"
target_row "UCX rc_verbs, same host ($(pathlabel default)): 1 MiB put bandwidth" "$(b_med "mw:ucx_srn:$DEF:put_bw" 1048576)" "GB/s" "UCX sm" "$(b_med base:ucx_sm:put_bw 1048576)" ">=" 0.5
target_row "UCX rc_verbs, same host ($(pathlabel default)): 8 B put latency" "$(b_med "mw:ucx_srn:$DEF:put_lat" 8)" "us" "UCX sm" "$(b_med base:ucx_sm:put_lat 8)" "<=" 3
target_row "UCX rc_verbs, UDP path: 64 KiB put bandwidth" "$(b_med mw:ucx_srn:udp:put_bw 65536)" "GB/s" "UCX tcp" "$(b_med base:ucx_tcp:put_bw 65536)" ">=" 2
target_row "Open MPI over softrnic, same host: 1 MiB ping-pong bandwidth" "$(b_med mw:mpi_softrnic:bw 1048576)" "GB/s" "Open MPI btl tcp" "$(b_med mw:mpi_tcp:bw 1048576)" ">=" 2
target_row "Open MPI over softrnic, same host: 4 B latency" "$(b_med mw:mpi_softrnic:lat 4)" "us" "Open MPI btl tcp" "$(b_med mw:mpi_tcp:lat 4)" "<=" 1
echo

# --- Bandwidth ------------------------------------------------------------
echo "## Bandwidth vs message size (GB/s)"
echo
hdr="| size |"; sep="|---|"
for p in $PATHS; do
	for v in WRITE READ SEND; do hdr="$hdr $v ($(pathlabel "$p")) |"; sep="$sep---|"; done
done
hdr="$hdr UCX put (sm) | memcpy | process_vm_writev | WRITE / $( [ -n "$ucx_bw" ] && echo UCX || echo memcpy) |"; sep="$sep---|---|---|---|"
echo "$hdr"; echo "$sep"
for s in $BW_SIZES; do
	row="| $(hsize "$s") |"
	for p in $PATHS; do
		for v in write read send; do row="$row $(fmt "$(b_med "srn:$p:${v}_bw" "$s")") |"; done
	done
	u=$(b_med base:ucx_sm:put_bw "$s"); m=$(b_med base:memcpy "$s")
	ref=$u; [ -z "$ucx_bw" ] && ref=$m
	row="$row $(fmt "$u") | $(fmt "$m") | $(fmt "$(b_med base:vm_writev "$s")") | $(fmt "$(b_ratio "$(b_med "srn:$DEF:write_bw" "$s")" "$ref")") |"
	echo "$row"
done
echo

# --- UDP path throughput ---------------------------------------------------
echo "## UDP path throughput at 64 KiB (GB/s)"
echo
echo "| softrnic WRITE (udp) | UDP GSO->GRO | GSO->GRO + CRC-32 both ends | iperf3 TCP | UCX put (tcp) | WRITE / GSO | WRITE / GSO+CRC | WRITE / TCP |"
echo "|---|---|---|---|---|---|---|---|"
w=$(b_med srn:udp:write_bw 65536); g=$gso; t=$(b_med base:tcp 0)
echo "| $(fmt "$w") | $(fmt "$g") | $(fmt "$gso_icrc") | $(fmt "$t") | $(fmt "$(b_med base:ucx_tcp:put_bw 65536)") | $(fmt "$(b_ratio "$w" "$g")") | $(fmt "$(b_ratio "$w" "$gso_icrc")") | $(fmt "$(b_ratio "$w" "$t")") |"
echo
echo "GSO->GRO: $(grep -h -o 'seg [0-9]* batch [0-9]*' "$RAW"/base-gso-paced-r1.out 2>/dev/null | head -1) bytes (4096-byte RoCE"
echo "payload + BTH + ICRC per datagram). Ceiling = the better of: paced by the receiver (at most 4 MiB in"
echo "flight) $(fmt "$gso_p") GB/s, unpaced $(fmt "$gso_u") GB/s (loss: see raw/base-gso-unpaced-*.out)."
echo

# --- Latency -------------------------------------------------------------
echo "## Small-message latency (us; perftest's t_typical is the median, also its average and 99th percentile)"
echo
hdr="| test |"; sep="|---|"
for p in $PATHS; do hdr="$hdr median ($(pathlabel "$p")) | average | 99 % |"; sep="$sep---|---|---|"; done
echo "$hdr"; echo "$sep"
for t in "write_lat 2 WRITE 2 B" "send_lat 2 SEND 2 B" "send_lat_srq 2 SEND 2 B into a shared receive queue (--use-srq)" "send_lat_ud 2 SEND 2 B over UD (-c UD)" "read_lat 2 READ 2 B (round trip)" "atomic_lat 8 ATOMIC FETCH_AND_ADD 8 B (round trip)"; do
	set -- $t
	key=$1 sz=$2; shift 2
	row="| $* |"
	for p in $PATHS; do
		for q in "" :avg :p99; do row="$row $(fmt "$(b_med "srn:$p:$key$q" "$sz")") |"; done
	done
	echo "$row"
done
echo
echo "| baseline, 2 B | us |"
echo "|---|---|"
echo "| shared-memory ping-pong (busy-poll, one way) | $(fmt "$shm_pp") |"
echo "| UDP ping-pong 127.0.0.1 (busy-poll, one way) | $(fmt "$(b_med base:udp_pp 2)") |"
echo "| UDP ping-pong, each message with an ACK (2 x 20 B, GSO/GRO; one way) | $(fmt "$pp_ack") |"
echo "| the same, each receive also asking for the sender's address and the GRO segment size | $(fmt "$pp_ackm") |"
echo "| UCX ucp_put_lat, UCX_TLS=sm | $(fmt "$ucx_lat") |"
echo "| UCX ucp_put_lat, UCX_TLS=tcp | $(fmt "$(b_med base:ucx_tcp:put_lat 2)") |"
echo "| libfabric fi_pingpong -p shm (usec/xfer) | $(fmt "$(b_med base:fi_shm:lat 2)") |"
echo "| libfabric fi_pingpong -p tcp (usec/xfer) | $(fmt "$(b_med base:fi_tcp:lat 2)") |"
echo

if [ "${LAT_ALL:-1}" = 1 ]; then
	echo "## Latency vs message size (us)"
	echo
	hdr="| size |"; sep="|---|"
	for p in $PATHS; do hdr="$hdr WRITE ($(pathlabel "$p")) | SEND ($(pathlabel "$p")) |"; sep="$sep---|---|"; done
	echo "$hdr UCX put (sm) |"; echo "$sep---|"
	for s in 2 64 4096 65536 1048576 8388608; do
		row="| $(hsize "$s") |"
		for p in $PATHS; do
			row="$row $(fmt "$(b_med "srn:$p:write_lat" "$s")") | $(fmt "$(b_med "srn:$p:send_lat" "$s")") |"
		done
		echo "$row $(fmt "$(b_med base:ucx_sm:put_lat "$s")") |"
	done
	echo
fi

# --- Message rate / idle ---------------------------------------------------
echo "## Message rate, ib_write_bw -s 8 (Mpps)"
echo
hdr="| QPs |"; sep="|---|"
for p in $PATHS; do hdr="$hdr softrnic ($(pathlabel "$p")) |"; sep="$sep---|"; done
echo "$hdr"; echo "$sep"
for q in 1 4; do
	row="| -q $q |"
	for p in $PATHS; do row="$row $(fmt "$(b_med "srn:$p:rate" "q$q")") |"; done
	echo "$row"
done
echo
echo "## Idle CPU (RC QP pair connected, receives posted, CQ armed, no traffic, 3 s)"
echo
for p in $PATHS; do echo "- $(pathlabel "$p"): $(fmt "$(b_med "srn:$p:idle" 0)") % CPU (all threads, getrusage)"; done
echo
echo "## Notes"
echo
if [ -s "$RAW/notes.txt" ]; then sed 's/^/- /' "$RAW/notes.txt"; else echo "- none"; fi
echo "- Raw outputs of every run: bench/results/raw/ (not in git)."
echo
echo "![bandwidth and latency vs message size](latest.png)"
} >"$MD.tmp" && mv "$MD.tmp" "$MD"

# --- Plot ------------------------------------------------------------------
if ! command -v gnuplot >/dev/null; then
	echo "report: gnuplot not installed (apt-get install gnuplot-nox): no plot" >&2
	exit 0
fi
# Columns: size then one series each; "-" = not measured.
{
	printf 'size'
	for p in $PATHS; do for v in WRITE READ SEND; do printf '\t"%s (%s)"' "$v" "$(pathlabel "$p")"; done; done
	printf '\t"UCX put (sm)"\t"memcpy"\t"process_vm_writev"\n'
	for s in $BW_SIZES; do
		printf '%s' "$s"
		for p in $PATHS; do for v in write read send; do printf '\t%s' "$(b_med "srn:$p:${v}_bw" "$s" | sed 's/^$/-/')"; done; done
		for k in base:ucx_sm:put_bw base:memcpy base:vm_writev; do
			v=$(b_med "$k" "$s"); printf '\t%s' "${v:--}"
		done
		printf '\n'
	done
} >"$RAW/bw.dat"
{
	printf 'size'
	for p in $PATHS; do printf '\t"WRITE (%s)"\t"SEND (%s)"' "$(pathlabel "$p")" "$(pathlabel "$p")"; done
	printf '\t"UCX put (sm)"\t"shm ping-pong"\t"UDP ping-pong"\n'
	sizes=$(awk -F'\t' '$1 ~ /^srn:.*:(write|send)_lat$/ || $1 == "base:ucx_sm:put_lat" { print $2 }' "$RAW/samples.tsv" | sort -gu)
	[ -n "$sizes" ] || sizes=2
	for s in $sizes; do
		printf '%s' "$s"
		for p in $PATHS; do
			for k in write_lat send_lat; do
				v=$(b_med "srn:$p:$k" "$s")
				printf '\t%s' "${v:--}"
			done
		done
		v=$(b_med base:ucx_sm:put_lat "$s"); printf '\t%s' "${v:--}"
		if [ "$s" = 2 ]; then printf '\t%s\t%s' "$(fmt "$shm_pp" | sed 's/—/-/')" "$(b_med base:udp_pp 2 | sed 's/^$/-/')"; else printf '\t-\t-'; fi
		printf '\n'
	done
} >"$RAW/lat.dat"
"$SRC/bench/plot.sh" "$RAW/bw.dat" "$RAW/lat.dat" "$PNG" "$(date -u '+%Y-%m-%d'), $(nproc) CPUs"
exit 0
