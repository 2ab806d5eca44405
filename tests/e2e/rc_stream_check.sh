#!/usr/bin/env bash
# tests/rc_stream_check, the checked stream the fault tests (tests/net/
# fault_*.sh) move, on srn_lo through `softrnic run`: RC SENDs, WRITEs
# with immediate and both mixed, UC and UD SENDs, each 8 MiB, must arrive
# intact, once and in order; and the checker must catch a corrupted, a
# duplicated and a skipped message (-X, injected by the sender), so a
# fault test that passes means something.
. "$(dirname "$0")/../lib/e2e.sh"
CHECK="$SRN_BUILD/tests/rc_stream_check"
[ -x "$CHECK" ] || t_skip "tests/rc_stream_check not built"

# stream LABEL "CLIENT ARGS": both sides' exit statuses in T_PAIR_SRV/CLI.
stream() {
	local label=$1 args=$2 port
	port=$(t_port)
	t_pair "$label" 60 "$CHECK -d srn_lo -p $port -T 40" "$CHECK -d srn_lo -p $port -T 40 $args 127.0.0.1"
}

for args in "-t rc -o send" "-t rc -o write" "-t rc -o mix -s 4096" "-t uc -o send -s 4096 -L 50" \
	"-t ud -o send -s 1024 -L 50"; do
	if stream clean "$args -m 8"; then
		t_pass "$args: $(grep -o '[0-9.]* MB/s' "$T_TMP/clean.client"), $(grep -o 'delivered [0-9]*' "$T_TMP/clean.client")"
	else
		t_fail "$args"
	fi
done
for x in corrupt dup skip; do
	stream "x$x" "-t rc -o mix -m 2 -X $x" >/dev/null
	if [ "$T_PAIR_SRV" -eq 1 ] && [ "$T_PAIR_CLI" -eq 1 ]; then
		t_pass "-X $x caught: $(grep '^client: rc' "$T_TMP/x$x.client")"
	else
		t_fail "-X $x: server exit $T_PAIR_SRV, client exit $T_PAIR_CLI (1 expected)"
		tail -5 "$T_TMP/x$x.client"
	fi
done
t_done
