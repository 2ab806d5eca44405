#!/usr/bin/env bash
# 5 ms of delay with 2 ms of jitter between two hosts: two network
# namespaces this test creates (192.168.97.0/24, addresses only inside
# them) joined through a third, where tests/impair_relay bridges them and
# holds every frame 5 +- 2 ms, both directions.  Twice: with frames
# leaving in order of their release time (jitter reorders, as netem's
# does: hard on go-back-N, so the size is small) and with each direction
# kept in order (-O).  rc_stream_check's RC stream must arrive intact,
# once and in order; rates are printed beside the clean bridge of the
# same run, and ib_write_bw's beside them.  FAULT_LONG=1 moves 256 MiB
# each.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/fault.sh"
fault_bridged fy 192.168.97 ""

fault_relay_case clean "RC, clean bridge" "" 16 "-t rc -o mix"
CLEAN=$(fault_mbs clean)
fault_relay_case jitter "RC, 5 ms +- 2 ms, reordering" "-d 5 -j 2" 1:slow "-t rc -o mix"
fault_relay_case inorder "RC, 5 ms +- 2 ms, in order" "-d 5 -j 2 -O" 16 "-t rc -o mix"

# perftest's raw rate, no data checked: clean bridge and in-order delay
if command -v ib_write_bw >/dev/null; then
	n=$([ "$FAULT_LONG" = 1 ] && echo 4096 || echo 200)
	for c in "bw0|" "bw1|-d 5 -j 2 -O"; do
		name=${c%%|*}
		fault_relay "${c#*|}"
		if fault_perftest "$name" "$(fault_secs 60)" "ib_write_bw -x 0 -F -s 65536 -n $n"; then
			t_pass "ib_write_bw 64 KiB x $n, relay '${c#*|}': $(fault_perftest_mbs "$name") MB/s"
		else
			t_fail "ib_write_bw, relay '${c#*|}'"
		fi
		fault_relay_stop
		fault_row "ib_write_bw, relay '${c#*|}'" "$name" $((n / 16)) "$(fault_perftest_mbs "$name")" \
			"$(fault_perftest_mbs bw0)" 0
	done
fi
t_done
