#!/usr/bin/env bash
# Debian's unmodified ib_send_lat over softrnic (RC, srn_lo, GID 0).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_send_lat
perftest_one ib_send_lat "-a" -a -n 20
perftest_one ib_send_lat "-s 2" -s 2 -n 1000
# -e: one completion event, then one poll of one CQ, per step; both ends
# hung when a reply's completion was pushed before the ACK's that rode
# with it (1 run in ~3 over UDP before engine_rx.c processed responses first)
for i in 1 2 3; do
	PERFTEST_SECS=60 perftest_one ib_send_lat "-s 2 -e (events, run $i)" -s 2 -n 1000 -e
done
t_done
