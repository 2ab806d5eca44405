#!/usr/bin/env bash
# Scale figures (issue 24): memory and time per QP and per MR at 10k QPs
# and 100k MRs in one process, and N processes sharing srn_lo, on both
# transport paths; with --before, a second build (e.g. of the commit
# before a change) measured in the same run, alternating with this one.
# Prints a Markdown report on stdout; raw outputs go to BUILD/bench-results/scale/.
#
# Usage: bench/scale.sh [--qps N] [--mrs N] [--procs "8 32"] [--before BUILD]
# Env: SRN_BUILD (build dir, default ./build).
set -u
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${SRN_BUILD:-$SRC/build}
NQP=10000 NMR=100000 PROCS="8 32" BEFORE=
while [ $# -gt 0 ]; do
	case $1 in
	--qps) NQP=$2; shift ;;
	--mrs) NMR=$2; shift ;;
	--procs) PROCS=$2; shift ;;
	--before) BEFORE=$(cd "$2" && pwd) || exit 2; shift ;;
	-h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "scale.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done
RAW=$BUILD/bench-results/scale
mkdir -p "$RAW"
for b in "$BUILD" ${BEFORE:+"$BEFORE"}; do
	[ -x "$b/bin/scale" ] || { echo "scale.sh: $b/bin/scale missing: build first" >&2; exit 1; }
done

# run NAME BUILD PATH ARGS...: one bounded run; its summary line to stdout.
# (It runs in $(...): a failure is remembered in a file, not a variable.)
rm -f "$RAW/.failed"
run() {
	local name=$1 build=$2 path=$3; shift 3
	local envp=(env -u SOFTRNIC_TRANSPORT)
	[ "$path" = udp ] && envp=(env SOFTRNIC_TRANSPORT=udp)
	if ! timeout -k 5 600 "${envp[@]}" "$build/bin/scale" "$@" >"$RAW/$name.out" 2>&1; then
		echo "scale.sh: $name failed (see $RAW/$name.out)" >&2
		echo "$name" >>"$RAW/.failed"
	fi
	grep -E '^(qp|mr|procs|limits):' "$RAW/$name.out" | tail -1
}
# val LINE KEY: the value of KEY=... in a summary line.
val() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
kb() { awk -v b="$1" 'BEGIN { if (b == "") print "-"; else printf "%.1f", b / 1024 }'; }

BUILDS="after:$BUILD"
[ -n "$BEFORE" ] && BUILDS="before:$BEFORE after:$BUILD"

echo "# softrnic at scale"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r), vm.max_map_count $(cat /proc/sys/vm/max_map_count)"
echo
echo "Command: \`bench/scale.sh --qps $NQP --mrs $NMR --procs \"$PROCS\"${BEFORE:+ --before $BEFORE}\`"
echo
echo "$(run limits "${BUILD}" default limits)"
echo
echo "## $NQP RC QPs in one process (64 per shared CQ, connected in pairs, one SEND each way)"
echo
echo "| build | path | KiB/QP created | KiB/QP after traffic | create us | connect us | destroy us | traffic ms | QPs ok |"
echo "|---|---|---|---|---|---|---|---|---|"
for path in default udp; do
	for bb in $BUILDS; do
		l=$(run "qp-${bb%%:*}-$path" "${bb#*:}" "$path" qp -n "$NQP")
		echo "| ${bb%%:*} | $path | $(kb "$(val "$l" rss_per_qp)") | $(kb "$(val "$l" rss_per_qp_used)") | $(val "$l" create_us) | $(val "$l" connect_us) | $(val "$l" destroy_us) | $(val "$l" ping_ms) | $(val "$l" ok) |"
	done
done
echo
echo "## $NMR MRs of 4 KiB in one process"
echo
echo "| build | path | layout | bytes/MR (RSS) | bytes/MR (/dev/shm) | register us | deregister us | registered |"
echo "|---|---|---|---|---|---|---|---|"
for path in default udp; do
	for lay in one apart; do
		for bb in $BUILDS; do
			a=; [ "$lay" = apart ] && a=-a
			l=$(run "mr-${bb%%:*}-$path-$lay" "${bb#*:}" "$path" mr -n "$NMR" $a)
			echo "| ${bb%%:*} | $path | $(val "$l" layout) | $(val "$l" rss_per_mr) | $(val "$l" shm_per_mr) | $(val "$l" reg_us) | $(val "$l" dereg_us) | $(val "$l" registered) |"
		done
	done
done
echo
echo "## Processes sharing srn_lo (4 QPs each, 2 connected to each neighbour)"
echo
echo "| build | path | processes | RSS/process KiB (avg, min-max) | of it for the QPs KiB | /dev/shm held KiB | failed | seconds |"
echo "|---|---|---|---|---|---|---|---|"
for path in default udp; do
	for np in $PROCS; do
		for bb in $BUILDS; do
			l=$(run "procs-${bb%%:*}-$path-$np" "${bb#*:}" "$path" procs -p "$np" -n 4)
			echo "| ${bb%%:*} | $path | $np | $(val "$l" rss_kb_avg) ($(val "$l" rss_kb_min)-$(val "$l" rss_kb_max)) | $(val "$l" rss_kb_for_qps_avg) | $(val "$l" shm_kb_max) | $(val "$l" failed) | $(val "$l" secs) |"
		done
	done
done
if [ -s "$RAW/.failed" ]; then
	echo
	echo "Failed runs: $(tr '\n' ' ' <"$RAW/.failed")(outputs in $RAW)"
	exit 1
fi
