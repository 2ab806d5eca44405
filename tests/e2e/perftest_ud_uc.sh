#!/usr/bin/env bash
# Debian's unmodified perftest over the UD and UC transports and with a
# shared receive queue (srn_lo, GID 0): both sides exit 0 and the client
# prints its result table (perftest checks every completion's status).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_send_bw ib_send_lat ib_write_bw ib_write_lat
perftest_one ib_send_bw "-c UD -a" -c UD -a -n 20
perftest_one ib_send_lat "-c UD -a" -c UD -a -n 20
perftest_one ib_send_bw "-c UC -a" -c UC -a -n 20
perftest_one ib_send_lat "-c UC -a" -c UC -a -n 20
perftest_one ib_write_bw "-c UC -a" -c UC -a -n 20
perftest_one ib_write_lat "-c UC -a" -c UC -a -n 20
perftest_one ib_send_bw "--use-srq -a" --use-srq -a -n 20
perftest_one ib_send_bw "-c UD --use-srq" -c UD --use-srq -n 200
perftest_one ib_send_bw "-c UC --use-srq" -c UC --use-srq -n 200
t_done
