#!/usr/bin/env bash
# The benchmark suite (issue 6): softrnic under Debian's perftest on srn_lo,
# on both transport paths, and the baselines it is judged against, in one
# run on one machine.  Writes latest.md (tables, ratios, targets met or
# not; medians of 3), latest.png (bandwidth and latency vs message size)
# and the raw outputs under raw/, into $BENCH_OUT (default
# BUILD/bench-results/, outside the tracked tree); with --update or
# UPDATE=1 into the tracked bench/results/ instead, to record a run in git.
#
# Usage: bench/run.sh [--quick] [--middleware] [--reps N] [--update] [--help]
#   --quick   one size per test and one repetition (for development)
#   --middleware  only the middleware section (UCX, Open MPI; bench/middleware.sh)
#   --reps N  repetitions per figure (default 3; the median is reported)
#   --update  write the report into bench/results/ (tracked); also UPDATE=1
# Env: SRN_BUILD (build dir, default ./build), BENCH_OUT (where results go,
# default SRN_BUILD/bench-results), BENCH_BUDGET (seconds after which
# remaining softrnic runs are skipped, default 540).
set -u
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SRN_BUILD:-$SRC/build}
BIN=$BUILD/bin
OUT=${BENCH_OUT:-$BUILD/bench-results}
[ "${UPDATE:-0}" = 1 ] && OUT=$SRC/bench/results
SOFTRNIC=$BIN/softrnic
QUICK=0
ONLY_MW=0
REPS=3
BUDGET=${BENCH_BUDGET:-540}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1; REPS=1 ;;
	--reps) REPS=$2; shift ;;
	--update) OUT=$SRC/bench/results ;;
	--middleware) ONLY_MW=1 ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done

RAW=$OUT/raw
. "$SRC/bench/lib.sh"
. "$SRC/bench/middleware.sh"
trap 'b_cleanup' EXIT
trap 'echo; echo "bench: interrupted"; exit 130' INT TERM

die() { echo "bench: $*" >&2; exit 1; }
for p in softrnic memcpy_bw vm_writev_bw shm_pingpong udp_pingpong udp_gso_bw idle_qp; do
	[ -x "$BIN/$p" ] || die "$BIN/$p missing: build first (make build, or set SRN_BUILD)"
done
for p in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_read_lat ib_send_lat ib_atomic_lat; do
	command -v "$p" >/dev/null || die "$p missing: apt-get install perftest (make deps-test)"
done
"$SOFTRNIC" devices 2>/dev/null | grep -qw srn_lo || die "softrnic has no srn_lo device ($SOFTRNIC devices)"

mkdir -p "$OUT"
rm -rf "$RAW"
mkdir -p "$RAW"
: >"$RAW/samples.tsv"
: >"$RAW/notes.txt"
note() { echo "$*" >>"$RAW/notes.txt"; }

# --- What to run --------------------------------------------------------
if [ "$QUICK" = 1 ]; then
	BW_SIZES="65536 1048576"
	LAT_ALL=0
else
	BW_SIZES="8 64 512 4096 65536 1048576 8388608"
	LAT_ALL=1	# also latency at 64 B..8 MiB for the plot
fi

# Transport paths: the default (same-host shared memory once it exists)
# and SOFTRNIC_TRANSPORT=udp.  A library that never reads the variable has
# one path only: run it once and say so.
if grep -aq SOFTRNIC_TRANSPORT "$BUILD/lib/libibverbs.so.1" 2>/dev/null; then
	PATHS="default udp"
	SAME_PATH=0
else
	PATHS="udp"
	SAME_PATH=1
	note "The engine does not read SOFTRNIC_TRANSPORT yet: the default path is the UDP path, measured once (columns 'default' and 'udp' are the same run)."
fi
path_env() { # PATH -> env prefix
	if [ "$1" = udp ]; then echo "env SOFTRNIC_TRANSPORT=udp"; else echo "env -u SOFTRNIC_TRANSPORT"; fi
}

have() { command -v "$1" >/dev/null 2>&1; }

# --- Measurements (each one step; prints its result) --------------------
# perftest iterations: about 1 GiB per run, 20..20000 messages.  Long
# enough for the steady state the baselines are measured in (udp_gso_bw
# and iperf3 run for a second or more): 128 MiB was ~40 ms on the UDP
# path, and its average then counted the start of the stream.
bw_iters() { local n=$(( (1 << 30) / $1 )); [ $n -lt 20 ] && n=20; [ $n -gt 20000 ] && n=20000; echo $n; }

over_budget() {
	if [ "$(b_elapsed)" -ge "$BUDGET" ]; then
		b_result "skipped (over the ${BUDGET}s budget)"
		[ -e "$RAW/.budget" ] || note "Some softrnic runs were skipped: the run passed its ${BUDGET}s budget (BENCH_BUDGET)."
		touch "$RAW/.budget"
		return 0
	fi
	return 1
}

# srn_perftest PATH NAME SECS PROG ARGS...: one server+client pair through softrnic.
srn_perftest() {
	local path=$1 name=$2 secs=$3; shift 3
	local envp; envp=$(path_env "$path")
	B_PORT=$(b_port)
	local prog=$1; shift
	local args="$prog -d srn_lo -x 0 -F -p $B_PORT $*"
	b_pair "$name" "$secs" "$envp $SOFTRNIC run -- $args" "$envp $SOFTRNIC run -- $args 127.0.0.1"
}

# perftest result rows: "#bytes #iterations ..." lines of numbers.
rows() { grep -E '^ +[0-9]+ +[0-9]+ +[0-9.]+' "$1" 2>/dev/null; }

step_srn_bw() { # PATH PROG SIZE REP
	local path=$1 prog=$2 size=$3 rep=$4 name="srn-$1-$2-$3-r$4"
	b_progress "softrnic($path) $prog ${size} B (rep $rep)"
	over_budget && return
	local t0=$SECONDS
	if srn_perftest "$path" "$name" 120 "$prog" -s "$size" -n "$(bw_iters "$size")" &&
	   rows "$RAW/$name.client" >/dev/null; then
		# BW average is in MiB/s (perftest's MB = 2^20); GB/s here is 1e9 B/s.
		local mib mpps
		mib=$(rows "$RAW/$name.client" | tail -1 | awk '{print $4}')
		mpps=$(rows "$RAW/$name.client" | tail -1 | awk '{print $5}')
		local gbs; gbs=$(awk -v m="$mib" 'BEGIN { printf "%.4g", m * 1048576 / 1e9 }')
		b_record "srn:$path:${prog#ib_}" "$size" "$gbs"
		b_record "srn:$path:${prog#ib_}:mpps" "$size" "$mpps"
		b_result "$gbs GB/s, $mpps Mpps ($((SECONDS - t0))s)"
	else
		b_result "FAILED (raw/$name.*)"
		note "softrnic($path) $prog -s $size failed: see raw/$name.server, raw/$name.client"
	fi
}

step_srn_lat() { # PATH PROG SIZE REP [srq|ud]
	local path=$1 prog=$2 size=$3 rep=$4 var=${5:-} name="srn-$1-$2${5:+-$5}-$3-r$4" sz
	local opt=; case $var in srq) opt="--use-srq" ;; ud) opt="-c UD" ;; esac
	b_progress "softrnic($path) $prog ${size} B${opt:+ $opt} (rep $rep)"
	over_budget && return
	# 2-8 B: 20000 exchanges, as the UCX and UDP ping-pong baselines
	# they are compared with (perftest has no warm-up: with 1000, the
	# first cold ones weigh on it); the curve's larger sizes fewer.
	if [ "$size" -le 8 ]; then sz="-s $size -n 20000"
	elif [ "$size" -le 65536 ]; then sz="-s $size -n 200"
	else sz="-s $size -n 20"; fi
	[ "$prog" = ib_atomic_lat ] && sz="-n 20000"	# atomics are 8 B
	[ -n "$opt" ] && sz="$sz $opt"
	local t0=$SECONDS
	if srn_perftest "$path" "$name" 150 "$prog" $sz && rows "$RAW/$name.client" >/dev/null; then
		# t_typical (column 5) is perftest's median latency.
		local key="srn:$path:${prog#ib_}${var:+_$var}"
		rows "$RAW/$name.client" | while read -r b _ _ _ typ avg _ p99 _; do
			b_record "$key" "$b" "$typ"
			b_record "$key:avg" "$b" "$avg"
			b_record "$key:p99" "$b" "$p99"
		done
		b_result "$(rows "$RAW/$name.client" | head -1 | awk '{print $5 " us at " $1 " B"}') ($((SECONDS - t0))s)"
	else
		b_result "FAILED (raw/$name.*)"
		note "softrnic($path) $prog $size failed: see raw/$name.server, raw/$name.client"
	fi
}

step_srn_rate() { # PATH QPS REP
	local path=$1 q=$2 rep=$3 name="srn-$1-rate-q$2-r$3"
	b_progress "softrnic($path) ib_write_bw -s 8 -q $q msg rate (rep $rep)"
	over_budget && return
	if srn_perftest "$path" "$name" 120 ib_write_bw -s 8 -q "$q" -n 100000 && rows "$RAW/$name.client" >/dev/null; then
		local mpps; mpps=$(rows "$RAW/$name.client" | tail -1 | awk '{print $5}')
		b_record "srn:$path:rate" "q$q" "$mpps"
		b_result "$mpps Mpps"
	else
		b_result "FAILED (raw/$name.*)"
		note "softrnic($path) message rate -q $q failed: see raw/$name.*"
	fi
}

step_srn_idle() { # PATH REP
	local path=$1 rep=$2 name="srn-$1-idle-r$2"
	b_progress "softrnic($path) idle RC QP pair, CPU over 3 s (rep $rep)"
	over_budget && return
	if b_one "$name" 30 $(path_env "$path") "$SOFTRNIC" run -- "$BIN/idle_qp" -d srn_lo -t 3; then
		local pct; pct=$(awk '/% CPU/ {print $3}' "$RAW/$name.out")
		b_record "srn:$path:idle" 0 "$pct"
		b_result "$pct % CPU"
	else
		b_result "FAILED (raw/$name.out)"
		note "idle_qp on path $path failed: see raw/$name.out"
	fi
}

step_copy() { # memcpy_bw|vm_writev_bw SIZE REP
	local prog=$1 size=$2 rep=$3 name="base-$1-$2-r$3"
	b_progress "baseline $prog $size B (rep $rep)"
	if b_one "$name" 20 "$BIN/$prog" -s "$size" -t 0.2; then
		local v; v=$(grep -oE '[0-9.]+ GB/s' "$RAW/$name.out" | awk '{print $1}')
		b_record "base:${prog%_bw}" "$size" "$v"
		b_result "$v GB/s"
	elif [ "$prog" = vm_writev_bw ] && grep -q refused "$RAW/$name.out"; then
		b_result "refused by the kernel"
		note "process_vm_writev was refused here: $(cat "$RAW/$name.out")"
	else
		b_result "FAILED (raw/$name.out)"
	fi
}

step_pingpong() { # shm|udp REP
	local kind=$1 rep=$2 name="base-$1pp-r$2" n=100000
	[ "$kind" = udp ] && n=20000
	b_progress "baseline ${kind}_pingpong 2 B, busy-polling (rep $rep)"
	if b_one "$name" 60 "$BIN/${kind}_pingpong" -s 2 -n $n; then
		local v; v=$(grep -oE 'median [0-9.]+' "$RAW/$name.out" | awk '{print $2}')
		b_record "base:${kind}_pp" 2 "$v"
		b_result "$v us one way (median)"
	else
		b_result "FAILED (raw/$name.out)"
	fi
}

# The least an RC transport sends per message on UDP sockets: the message
# and the ACK of the one before, two 20-byte datagrams (a 2-byte SEND and
# an ACK are 20 bytes of RoCE each) in one GSO send, GRO on receive.
# meta: each receive also asks for the sender's address and the GRO
# segment size, which a RoCE receiver needs (udp_pingpong -m).
step_pingpong_ack() { # REP [meta]
	local rep=$1 name="base-udppp-ack-r$1" key=base:udp_pp_ack m= what="message + ACK per direction"
	[ "${2:-}" = meta ] && name="base-udppp-ackm-r$1" key=base:udp_pp_ackm m=-m &&
		what="message + ACK, receives ask for address and segment size"
	b_progress "baseline udp_pingpong -a $m: $what, busy-polling (rep $rep)"
	if b_one "$name" 60 "$BIN/udp_pingpong" -a $m -s 20 -n 20000; then
		local v; v=$(grep -oE 'median [0-9.]+' "$RAW/$name.out" | awk '{print $2}')
		b_record "$key" 2 "$v"
		b_result "$v us one way (median)"
	else
		b_result "FAILED (raw/$name.out)"
	fi
}

step_gso() { # paced|unpaced|icrc REP
	local mode=$1 rep=$2 name="base-gso-$1-r$2" w=4M key=base:gso c=
	[ "$mode" = unpaced ] && w=0 && key=base:gso_unpaced
	# both ends compute a CRC-32 per datagram, as RoCEv2's ICRC demands
	[ "$mode" = icrc ] && c=-c && key=base:gso_icrc
	b_progress "baseline UDP GSO->GRO 64 KiB batches, $mode, 1 s (rep $rep)"
	if b_one "$name" 30 "$BIN/udp_gso_bw" -t 1 -w "$w" $c; then
		local v; v=$(grep -oE 'goodput [0-9.]+' "$RAW/$name.out" | awk '{print $2}')
		b_record "$key" 65536 "$v"
		b_result "$v GB/s ($(grep -oE 'loss [0-9.]+%' "$RAW/$name.out"))"
	else
		b_result "FAILED (raw/$name.out)"
	fi
}

step_iperf3() { # REP
	local name="base-iperf3-r$1"
	b_progress "baseline iperf3 TCP 127.0.0.1, 2 s (rep $1)"
	B_PORT=$(b_port)
	if b_pair "$name" 30 "iperf3 -s -1 -p $B_PORT" "iperf3 -c 127.0.0.1 -p $B_PORT -t 2 -f g"; then
		local v; v=$(awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i+1) == "Gbits/sec") g = $i } END { if (g != "") printf "%.4g", g / 8 }' "$RAW/$name.client")
		b_record "base:tcp" 0 "$v"
		b_result "$v GB/s"
	else
		b_result "FAILED (raw/$name.*)"
	fi
}

# ucx_record KEY SIZE TEST FILE: records ucx_perftest's figure from FILE's
# final line (iters, lat 50%, avg, overall, MB/s avg, overall, msg/s avg,
# overall; UCX's MB is 2^20 bytes): GB/s for ucp_put_bw, else the median
# latency in us.
ucx_record() {
	local key=$1 size=$2 test=$3 line v
	line=$(grep -E '^ +[0-9]+ +[0-9.]+ +[0-9.]+' "$4" | tail -1)
	if [ -z "$line" ]; then b_result "FAILED (no result line)"; return; fi
	if [ "$test" = ucp_put_bw ]; then
		v=$(echo "$line" | awk '{ printf "%.4g", $6 * 1048576 / 1e9 }')
		b_result "$v GB/s"
	else
		v=$(echo "$line" | awk '{ print $2 }')
		b_result "$v us (median)"
	fi
	b_record "$key" "$size" "$v"
}

step_ucx() { # sm|tcp TEST SIZE REP
	local tls=$1 test=$2 size=$3 rep=$4 name="base-ucx-$1-$2-$3-r$4" n
	b_progress "baseline ucx_perftest UCX_TLS=$tls $test $size B (rep $rep)"
	case $tls/$test in
	sm/ucp_put_bw) n=$(( (1 << 30) / size )); [ $n -gt 100000 ] && n=100000; [ $n -lt 200 ] && n=200 ;;
	sm/ucp_put_lat) n=$([ "$size" -le 65536 ] && echo 20000 || echo 500) ;;
	tcp/ucp_put_bw) n=$(( (256 << 20) / size )); [ $n -gt 20000 ] && n=20000 ;;
	*) n=2000 ;;
	esac
	B_PORT=$(b_port)
	if b_pair "$name" 60 "env UCX_TLS=$tls,self ucx_perftest -p $B_PORT" \
		"env UCX_TLS=$tls,self ucx_perftest 127.0.0.1 -p $B_PORT -t $test -s $size -n $n -w 100 -f"; then
		ucx_record "base:ucx_$tls:${test#ucp_}" "$size" "$test" "$RAW/$name.client"
	else
		b_result "FAILED (raw/$name.*)"
		note "ucx_perftest UCX_TLS=$tls $test $size failed: see raw/$name.*"
	fi
}

step_fi() { # shm|tcp SIZE REP
	local prov=$1 size=$2 rep=$3 name="base-fi-$1-$2-r$3" n=20000
	[ "$prov" = tcp ] && n=1000
	[ "$size" -gt 65536 ] && n=200
	b_progress "baseline fi_pingpong -p $prov $size B (rep $rep)"
	B_PORT=$(b_port)
	if b_pair "$name" 60 "fi_pingpong -p $prov -e rdm -B $B_PORT -I $n -S $size" \
		"fi_pingpong -p $prov -e rdm -P $B_PORT -I $n -S $size 127.0.0.1"; then
		# Columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
		local line; line=$(grep -E '^[0-9]+[kmg]? +[0-9]' "$RAW/$name.client" | tail -1)
		local lat bw
		lat=$(echo "$line" | awk '{print $7}')
		bw=$(echo "$line" | awk '{ printf "%.4g", $6 / 1000 }')
		b_record "base:fi_$prov:lat" "$size" "$lat"
		b_record "base:fi_$prov:bw" "$size" "$bw"
		b_result "$lat us/xfer, $bw GB/s"
	else
		b_result "FAILED (raw/$name.*)"
		note "fi_pingpong -p $prov $size failed: see raw/$name.*"
	fi
}

# --- The plan -------------------------------------------------------------
# The baselines a target compares with are measured right beside the
# softrnic run they are compared with, in the same repetition: this VM
# drifts over minutes (cross-core transfers cost twice as much at some
# times as at others), and measured minutes apart the drift landed in the
# ratio.  The rest of the baselines come first.
STEPS=()
add() { STEPS+=("$*"); }
for r in $(seq "$REPS"); do
	for s in $BW_SIZES; do add step_copy memcpy_bw "$s" "$r"; add step_copy vm_writev_bw "$s" "$r"; done
	add step_pingpong shm "$r"
done
have iperf3 || note "iperf3 not installed: no TCP baseline (apt-get install iperf3)."
if have ucx_perftest; then
	for r in $(seq "$REPS"); do
		for s in $BW_SIZES; do add step_ucx sm ucp_put_bw "$s" "$r"; done
		add step_ucx tcp ucp_put_bw 65536 "$r"
		add step_ucx tcp ucp_put_lat 2 "$r"
		if [ "$LAT_ALL" = 1 ]; then
			for s in 64 4096 65536 1048576 8388608; do add step_ucx sm ucp_put_lat "$s" "$r"; done
		fi
	done
else
	note "ucx_perftest not installed: no UCX baseline; the same-host targets use memcpy / shm ping-pong instead (apt-get install ucx-utils)."
fi
if have fi_pingpong; then
	for r in $(seq "$REPS"); do
		add step_fi shm 2 "$r"; add step_fi tcp 2 "$r"
		add step_fi shm 1048576 "$r"
	done
else
	note "fi_pingpong not installed: no libfabric baseline (apt-get install libfabric-bin)."
fi
FIRST_PATH=${PATHS%% *}
# Repetition outermost, so a run cut by the budget still has both paths.
for r in $(seq "$REPS"); do
	for path in $PATHS; do
		for prog in ib_write_bw ib_read_bw ib_send_bw; do
			for s in $BW_SIZES; do
				[ "$QUICK" = 1 ] && [ "$prog" != ib_write_bw ] && [ "$s" != 65536 ] && continue
				if [ "$path" = udp ] && [ "$prog" = ib_write_bw ] && [ "$s" = 65536 ]; then
					# the UDP bandwidth targets' baselines
					add step_gso paced "$r"
					add step_gso unpaced "$r"
					add step_gso icrc "$r"
					have iperf3 && add step_iperf3 "$r"
				fi
				add step_srn_bw "$path" "$prog" "$s" "$r"
			done
		done
		add step_srn_lat "$path" ib_write_lat 2 "$r"
		# the same-host latency targets' baseline, between the two
		[ "$path" = "$FIRST_PATH" ] && have ucx_perftest && add step_ucx sm ucp_put_lat 2 "$r"
		if [ "$path" = udp ]; then
			# the UDP latency target's baseline and floor
			add step_pingpong udp "$r"
			add step_pingpong_ack "$r"
			add step_pingpong_ack "$r" meta
		fi
		add step_srn_lat "$path" ib_send_lat 2 "$r"
		add step_srn_lat "$path" ib_send_lat 2 "$r" srq
		add step_srn_lat "$path" ib_send_lat 2 "$r" ud
		add step_srn_lat "$path" ib_read_lat 2 "$r"
		add step_srn_lat "$path" ib_atomic_lat 8 "$r"
		if [ "$LAT_ALL" = 1 ]; then	# the latency curve, for the plot
			for s in 64 4096 65536 1048576 8388608; do
				add step_srn_lat "$path" ib_write_lat "$s" "$r"
				add step_srn_lat "$path" ib_send_lat "$s" "$r"
			done
		fi
		add step_srn_rate "$path" 1 "$r"
		add step_srn_rate "$path" 4 "$r"
		add step_srn_idle "$path" "$r"
	done
done
[ "$ONLY_MW" = 1 ] && STEPS=()
add_middleware
B_TOTAL=${#STEPS[@]}

echo "bench: $B_TOTAL steps, $REPS repetition(s) each figure; paths: $PATHS$([ $SAME_PATH = 1 ] && echo ' (default = udp)'); raw outputs in $RAW"
for s in "${STEPS[@]}"; do
	$s
done
echo "bench: measurements done in $(b_elapsed)s; writing the report"
echo "$(b_elapsed)" >"$RAW/elapsed"

export SRC BUILD RAW OUT PATHS SAME_PATH QUICK REPS BW_SIZES LAT_ALL
"$SRC/bench/report.sh" || die "report failed"
echo "bench: wrote $OUT/latest.md$( [ -s "$OUT/latest.png" ] && echo " and $OUT/latest.png") in $(b_elapsed)s"
