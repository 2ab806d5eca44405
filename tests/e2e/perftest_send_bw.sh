#!/usr/bin/env bash
# Debian's unmodified ib_send_bw over softrnic (RC, srn_lo, GID 0).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_send_bw
perftest_one ib_send_bw "-a" -a -n 20
perftest_one ib_send_bw "-q 4" -q 4 -n 200
perftest_one ib_send_bw "-b" -b -n 200
t_done
