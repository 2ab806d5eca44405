#!/usr/bin/env bash
# Debian's unmodified ib_read_lat over softrnic (RC, srn_lo, GID 0).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_read_lat
perftest_one ib_read_lat "-a" -a -n 20
perftest_one ib_read_lat "-s 2" -s 2 -n 1000
t_done
