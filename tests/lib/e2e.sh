# Shared helpers for tests/e2e/*.sh (sourced, not run).
# Every spawned process is bounded by `timeout` and reaped before return.
set -u
SRN_BUILD=${SRN_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../build" && pwd)}
SRN_SOURCE=${SRN_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SOFTRNIC="$SRN_BUILD/bin/softrnic"
T_TMP=$(mktemp -d /tmp/srn-e2e.XXXXXX)
trap 'rm -rf "$T_TMP"' EXIT
T_FAILS=0
T_PASSES=0

t_skip() { echo "SKIP: $*"; exit 77; }
t_need() { for p in "$@"; do command -v "$p" >/dev/null 2>&1 || t_skip "$p not installed"; done; }
t_pass() { echo "ok   - $*"; T_PASSES=$((T_PASSES + 1)); }
t_fail() { echo "FAIL - $*"; T_FAILS=$((T_FAILS + 1)); }
# Sanitizer builds: every process the test starts writes its report to
# $T_TMP/san.PID rather than to output the test may not show; t_done
# prints each report and fails the test on it.
if [ -n "${SRN_SANITIZE:-}" ]; then
	for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
		export "$v=${!v:+${!v}:}log_path=$T_TMP/san"
	done
fi
# A program started without softrnic run needs the runtimes our libraries
# link preloaded: `env $T_SAN_ENV LD_LIBRARY_PATH=... PROG` (empty in a
# normal build).  It is not ours: no leak check (as in softrnic run).
# T_START_WAIT: how long a server gets to start listening (t_pair); a
# sanitizer build starts slower (seen: 0.3 s too short under ASan).
# T_SLOW: the factor for a test's time bounds (seen: a 200 ms port
# takeover in 207 ms under ASan).
T_SAN_RT="" T_SAN_ENV="" T_START_WAIT=0.3 T_SLOW=1
if [ -n "${SRN_SANITIZE:-}" ]; then
	T_START_WAIT=1 T_SLOW=3
	T_SAN_RT=$(ldd "$SRN_BUILD/lib/libibverbs.so.1" |
		awk '/\/lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd:)
	T_SAN_ENV="LD_PRELOAD=$T_SAN_RT ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0"
fi
t_sanitizer_reports() {
	local f
	for f in "$T_TMP"/san.*; do
		[ -e "$f" ] || continue
		t_fail "sanitizer report ($f):"
		sed 's/^/    | /' "$f" | head -80
	done
}
t_done() {
	t_sanitizer_reports
	echo "$T_PASSES passed, $T_FAILS failed"
	[ "$T_FAILS" -eq 0 ]
}

# A port to listen on (a TCP out-of-band exchange, an rdma_cm listener),
# random per run, below the ephemeral range (32768-60999) from which
# connect() and the CM directory take ports for a test running beside
# (seen: "Couldn't listen to port 39162"); see t_listen_port in t_cm.h.
t_port() { echo $(( 20000 + (RANDOM % 12000) )); }

# t_pair NAME SECS "SERVER CMD" "CLIENT CMD": runs both through softrnic,
# the client after the server listens; both must exit 0.  Output goes to
# $T_TMP/NAME.{server,client}.  Returns 0 when both succeed; their exit
# statuses are left in T_PAIR_SRV and T_PAIR_CLI.
t_pair() {
	local name=$1 secs=$2 scmd=$3 ccmd=$4 spid srv cli
	timeout -k 2 "$secs" "$SOFTRNIC" run -- $scmd >"$T_TMP/$name.server" 2>&1 &
	spid=$!
	sleep "$T_START_WAIT"
	timeout -k 2 "$secs" "$SOFTRNIC" run -- $ccmd >"$T_TMP/$name.client" 2>&1
	cli=$?
	wait $spid
	srv=$?
	T_PAIR_SRV=$srv T_PAIR_CLI=$cli
	if [ $srv -ne 0 ] || [ $cli -ne 0 ]; then
		echo "  server ($scmd) exit $srv:"; sed 's/^/    | /' "$T_TMP/$name.server" | tail -60
		echo "  client ($ccmd) exit $cli:"; sed 's/^/    | /' "$T_TMP/$name.client" | tail -60
		return 1
	fi
	return 0
}
