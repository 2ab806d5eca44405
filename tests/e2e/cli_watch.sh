#!/usr/bin/env bash
# softrnic qps and softrnic stats while an ibv_rc_pingpong pair runs: both
# QPs listed as RTS, each with the other's QPN, on the path the transport
# says; the counters of both engines read mid-run, growing between two
# samples, the two sides agreeing (one's rx is the other's tx), and the
# stats files gone once the programs exit.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_rc_pingpong awk

if [ "${SOFTRNIC_TRANSPORT:-}" = udp ]; then
	iters=100000 path=udp-local grow=tx_packets
else
	iters=1000000 path=same-host grow=direct_send
fi
port=$(t_port)
pp() { # ROLE [ADDR]: one side, its pid (kept by exec) in $T_TMP/ROLE.pid
	timeout -k 2 120 "$SOFTRNIC" run -- sh -c 'echo $$ >"$1"; shift; exec "$@"' sh \
		"$T_TMP/$1.pid" ibv_rc_pingpong -d srn_lo -g 0 -p "$port" -n "$iters" ${2:-} \
		>"$T_TMP/$1.out" 2>&1
}
# cnt FILE PID NAME: counter NAME of PID's engine in `softrnic stats` output
cnt() {
	awk -v p="pid $2 " -v n="$3" 'index($0, p) == 1 { on = 1; next } /^pid / { on = 0 }
		on && $1 == n { print $2; f = 1; exit } END { if (!f) print 0 }' "$1"
}
pp server & spid=$!
sleep 0.3
pp client 127.0.0.1 & cpid=$!
for _ in $(seq 100); do [ -s "$T_TMP/server.pid" ] && [ -s "$T_TMP/client.pid" ] && break; sleep 0.1; done
sp=$(cat "$T_TMP/server.pid" 2>/dev/null) cp=$(cat "$T_TMP/client.pid" 2>/dev/null)
echo "  server pid ${sp:-?}, client pid ${cp:-?}, $iters iterations, ${SOFTRNIC_TRANSPORT:-default} path"

# Until both engines have moved 2000 operations (bounded: 30 s).
st="$T_TMP/stats"
for _ in $(seq 150); do
	timeout 10 "$SOFTRNIC" stats -d srn_lo >"$st" 2>&1
	[ "$(cnt "$st" "$sp" "$grow")" -ge 2000 ] && [ "$(cnt "$st" "$cp" "$grow")" -ge 2000 ] && break
	sleep 0.2
done
timeout 10 "$SOFTRNIC" qps -d srn_lo >"$T_TMP/qps" 2>&1
timeout 20 "$SOFTRNIC" stats -d srn_lo -w 0.5 -c 1 >"$T_TMP/watch" 2>&1
ws=$?
alive=0; kill -0 "$spid" 2>/dev/null && kill -0 "$cpid" 2>/dev/null && alive=1

sed 's/^/  qps | /' "$T_TMP/qps" | grep -E "PID|^  qps \| ($sp|$cp) "
row() { awk -v p="$1" '$1 == p { print; exit }' "$T_TMP/qps"; }
read -r _ _ _ sq st_type st_state _ s_peer s_path <<<"$(row "$sp")"
read -r _ _ _ cq ct_type ct_state _ c_peer c_path <<<"$(row "$cp")"
if [ "$st_type/$st_state/$ct_type/$ct_state" = "RC/RTS/RC/RTS" ]; then
	t_pass "qps: both QPs RC and RTS"
else
	t_fail "qps: both QPs RC and RTS (server ${st_type:-none} ${st_state:-}, client ${ct_type:-none} ${ct_state:-})"
fi
if [ -n "${sq:-}" ] && [ "$s_peer" = "${cq:-}" ] && [ "$c_peer" = "$sq" ]; then
	t_pass "qps: each QP's peer is the other (QPN $sq <-> $cq)"
else
	t_fail "qps: each QP's peer is the other (server ${sq:-?} -> ${s_peer:-?}, client ${cq:-?} -> ${c_peer:-?})"
fi
[ "${s_path:-}/${c_path:-}" = "$path/$path" ] && t_pass "qps: path $path on both sides" ||
	t_fail "qps: path $path on both sides (${s_path:-?}, ${c_path:-?})"

# The watch: totals, then one interval with rates.
awk '/^---/ { n++ } !n' "$T_TMP/watch" >"$T_TMP/w0"
awk '/^---/ { n++ } n' "$T_TMP/watch" >"$T_TMP/w1"
for who in server:$sp client:$cp; do
	a=$(cnt "$T_TMP/w0" "${who#*:}" "$grow") b=$(cnt "$T_TMP/w1" "${who#*:}" "$grow")
	if [ "$ws" -eq 0 ] && [ "$alive" -eq 1 ] && [ "$a" -ge 2000 ] && [ "$b" -gt "$a" ]; then
		t_pass "stats -w: ${who%%:*} $grow $a -> $b in 0.5 s"
	else
		t_fail "stats -w: ${who%%:*} $grow grows (exit $ws, running $alive, $a -> $b)"
	fi
done
grep -q "$grow .*/s$" "$T_TMP/w1" && t_pass "stats -w: rates per second shown" ||
	t_fail "stats -w: rates per second shown"
if [ "${SOFTRNIC_TRANSPORT:-}" = udp ]; then
	# One sample reads both files within microseconds: what one side sent
	# the other received, give or take the packets in flight meanwhile.
	for dir in "$sp tx_packets $cp rx_packets" "$cp tx_packets $sp rx_packets"; do
		set -- $dir
		tx=$(cnt "$T_TMP/w1" "$1" "$2") rx=$(cnt "$T_TMP/w1" "$3" "$4")
		d=$((tx > rx ? tx - rx : rx - tx))
		if [ "$rx" -ge 2000 ] && [ "$d" -le $((tx / 20 + 100)) ]; then
			t_pass "stats: pid $1 sent $tx packets, pid $3 received $rx"
		else
			t_fail "stats: pid $1 sent $tx packets, pid $3 received $rx (differ by $d)"
		fi
	done
fi

wait "$spid"; s=$?
wait "$cpid"; c=$?
if [ "$s" -eq 0 ] && [ "$c" -eq 0 ] && grep -q "iters in" "$T_TMP/client.out"; then
	t_pass "the pair completes: $(grep 'iters in' "$T_TMP/client.out")"
else
	t_fail "the pair completes (server exit $s, client exit $c)"
	sed 's/^/    | /' "$T_TMP/server.out" "$T_TMP/client.out" | tail -10
fi
left=$(ls /dev/shm 2>/dev/null | grep -E -- "-stats-($sp|$cp)-")
[ -z "$left" ] && t_pass "stats files removed at exit" || t_fail "stats files removed at exit: $left"
timeout 10 "$SOFTRNIC" qps -d srn_lo >"$T_TMP/qps2" 2>&1
if awk -v a="$sp" -v b="$cp" '$1 == a || $1 == b' "$T_TMP/qps2" | grep -q .; then
	t_fail "qps: the exited pair's QPs are gone"
else
	t_pass "qps: the exited pair's QPs are gone"
fi

# Options.
for bad in "stats -w 0" "stats -w x" "stats -c 3" "stats --bogus" "qps --bogus"; do
	timeout 10 "$SOFTRNIC" $bad >/dev/null 2>"$T_TMP/err"; e=$?
	[ "$e" -eq 2 ] && grep -q '^softrnic: ' "$T_TMP/err" && t_pass "$bad: refused (exit 2)" ||
		t_fail "$bad: refused (exit $e, want 2)"
done
# -w ends on SIGINT (bounded anyway by -c: 30 s).
"$SOFTRNIC" stats -w 1 -c 30 >"$T_TMP/int" 2>&1 &
wp=$!
sleep 0.5
t0=$(date +%s%N)
kill -INT "$wp"
wait "$wp"; e=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$e" -eq 0 ] && [ "$ms" -lt 5000 ] && t_pass "stats -w stops on SIGINT (exit 0 in $ms ms)" ||
	t_fail "stats -w stops on SIGINT (exit $e in $ms ms)"
timeout 10 "$SOFTRNIC" qps -d nosuchdev >"$T_TMP/o" 2>&1
grep -q "^(no QPs on nosuchdev)$" "$T_TMP/o" && t_pass "qps -d with no QPs says so" ||
	t_fail "qps -d with no QPs says so"
t_done
