#!/usr/bin/env bash
# softrnic clean removes the /dev/shm state no process holds and keeps the
# rest: a stale file (old, held by nobody) goes, so does a killed
# program's stats file, one a live process keeps
# open stays, one just written stays (a process may be opening it), -n
# removes nothing, and a running softrnic program's own files survive a
# clean while it keeps working.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_rc_pingpong touch

stale=/dev/shm/softrnic-cleantest-stale-$$
held=/dev/shm/softrnic-cleantest-held-$$
fresh=/dev/shm/softrnic-cleantest-fresh-$$
cleanup() { rm -f "$stale" "$held" "$fresh"; rm -rf "$T_TMP"; }
trap cleanup EXIT
echo x >"$stale" && touch -d '-1 minute' "$stale"
echo x >"$held" && touch -d '-1 minute' "$held"
echo x >"$fresh"
# A live process holding $held open.
timeout 60 sh -c 'exec 3<"$1"; sleep 30' sh "$held" &
holder=$!
sleep 0.3

out=$(timeout 30 "$SOFTRNIC" clean -n 2>&1)
echo "$out" | sed 's/^/  -n | /' | grep cleantest
if echo "$out" | grep -q "would remove $stale " && [ -f "$stale" ]; then
	t_pass "clean -n names the stale file and leaves it"
else
	t_fail "clean -n names the stale file and leaves it"
fi

# A program killed before it closed its device leaves its stats file
# (softrnic stats): no process maps it, so stats skips it and clean
# removes it.
timeout -k 2 30 "$SOFTRNIC" run -- sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$T_TMP/k.pid" \
	ibv_rc_pingpong -d srn_lo -g 0 -p "$(t_port)" >/dev/null 2>&1 &
kp=$! kfile=
for _ in $(seq 100); do
	kpid=$(cat "$T_TMP/k.pid" 2>/dev/null)
	[ -n "$kpid" ] && kfile=$(ls /dev/shm/softrnic-srn_lo-stats-"$kpid"-* 2>/dev/null | head -1)
	[ -n "$kfile" ] && break
	sleep 0.1
done
[ -n "$kpid" ] && kill -9 "$kpid" 2>/dev/null
wait "$kp" 2>/dev/null
if [ -n "$kfile" ] && [ -e "$kfile" ]; then
	t_pass "a killed program leaves its stats file ($kfile)"
	touch -d '-1 minute' "$kfile"
	timeout 10 "$SOFTRNIC" stats >"$T_TMP/st" 2>&1
	grep -q "^pid $kpid " "$T_TMP/st" && t_fail "stats skips a dead engine" ||
		t_pass "stats skips a dead engine"
else
	t_fail "a killed program leaves its stats file (${kfile:-none found})"
fi

# A softrnic server waiting for its client: its registry, MR directory and
# port FIFO are held while clean runs, and the pair still completes.
port=$(t_port)
timeout -k 2 60 "$SOFTRNIC" run -- ibv_rc_pingpong -d srn_lo -g 0 -p "$port" -n 50 \
	>"$T_TMP/srv" 2>&1 &
spid=$!
sleep 0.5
out=$(timeout 30 "$SOFTRNIC" clean 2>&1)
echo "$out" | sed 's/^/  clean | /' | tail -3
[ ! -e "$stale" ] && t_pass "clean removed the stale file" || t_fail "clean removed the stale file"
if [ -n "$kfile" ]; then
	[ ! -e "$kfile" ] && echo "$out" | grep -q "removed $kfile " &&
		t_pass "clean removed the dead program's stats file" ||
		t_fail "clean removed the dead program's stats file"
fi
[ -e "$held" ] && t_pass "clean kept the file a live process holds" ||
	t_fail "clean kept the file a live process holds"
[ -e "$fresh" ] && t_pass "clean kept the file written just now" ||
	t_fail "clean kept the file written just now"
if timeout -k 2 60 "$SOFTRNIC" run -- ibv_rc_pingpong -d srn_lo -g 0 -p "$port" -n 50 127.0.0.1 \
	>"$T_TMP/cli" 2>&1 && wait $spid; then
	t_pass "a softrnic pair started before the clean completes"
else
	wait $spid
	t_fail "a softrnic pair started before the clean completes"
	sed 's/^/    | /' "$T_TMP/srv" "$T_TMP/cli" | tail -20
fi
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
t_done
