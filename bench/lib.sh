# Helpers for bench/run.sh (sourced): bounded processes, ports, progress,
# and a results file of samples with medians.  Every process started here
# runs under `timeout` and is reaped (or killed by pid on exit).

B_PIDS=()		# background processes still to reap
B_STEP=0		# progress counter
B_T0=$(date +%s)

b_cleanup() {
	local p
	for p in "${B_PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	B_PIDS=()
}

# A random TCP port in 20000-31999 that nothing uses right now (below the
# ephemeral range, where a connect() may take it after we looked).
b_port() {
	local p i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		p=$(( 20000 + RANDOM % 12000 ))
		command -v ss >/dev/null || break
		[ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ] && break
	done
	echo "$p"
}
b_elapsed() { echo $(( $(date +%s) - B_T0 )); }

# b_wait_listen PORT PID: until something listens on TCP PORT (or PID
# exits, or 10 s pass).  Falls back to a fixed pause without `ss`.
b_wait_listen() {
	local port=$1 pid=$2 i
	if ! command -v ss >/dev/null; then sleep 0.5; return 0; fi
	for i in $(seq 200); do
		ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# b_pair NAME SECS "SERVER CMD" "CLIENT CMD": server in the background,
# client once the server listens on $B_PORT; output to $RAW/NAME.{server,client}.
# The commands are word-split (no quoting inside).  Returns 0 if both exit 0.
b_pair() {
	local name=$1 secs=$2 scmd=$3 ccmd=$4 spid srv cli
	timeout -k 2 "$secs" $scmd >"$RAW/$name.server" 2>&1 &
	spid=$!
	B_PIDS+=("$spid")
	if ! b_wait_listen "$B_PORT" "$spid"; then
		sleep 0.3	# some servers (UCX) listen late or on another socket
	fi
	timeout -k 2 "$secs" $ccmd >"$RAW/$name.client" 2>&1
	cli=$?
	wait "$spid"
	srv=$?
	B_PIDS=()
	[ "$srv" -eq 0 ] && [ "$cli" -eq 0 ]
}

# b_one NAME SECS CMD...: one bounded process, output to $RAW/NAME.out.
b_one() {
	local name=$1 secs=$2; shift 2
	timeout -k 2 "$secs" "$@" >"$RAW/$name.out" 2>&1
}

# Progress: "[ 12/140  37s] what ... result"
b_progress() {
	B_STEP=$((B_STEP + 1))
	printf '[%3d/%3d %4ss] %-58s ' "$B_STEP" "$B_TOTAL" "$(b_elapsed)" "$1"
}
b_result() { echo "$*"; }

# Samples: one line per measurement: KEY <tab> X <tab> VALUE
b_record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RAW/samples.tsv"; }

# b_med KEY X: median of the samples (empty if none).
b_med() {
	awk -F'\t' -v k="$1" -v x="$2" '$1 == k && $2 == x { print $3 }' "$RAW/samples.tsv" |
		sort -g | awk '{ v[NR] = $1 } END {
			if (NR == 0) exit;
			if (NR % 2) printf "%.6g\n", v[(NR + 1) / 2];
			else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# b_count KEY X: how many samples.
b_count() { awk -F'\t' -v k="$1" -v x="$2" '$1 == k && $2 == x' "$RAW/samples.tsv" | wc -l; }

b_ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3g\n", a / b }'; }
