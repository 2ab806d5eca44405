#!/usr/bin/env bash
# Debian's unmodified ib_atomic_bw over softrnic (RC, srn_lo, GID 0).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_atomic_bw
perftest_one ib_atomic_bw "FETCH_AND_ADD" -A FETCH_AND_ADD -n 200
perftest_one ib_atomic_bw "CMP_AND_SWAP" -A CMP_AND_SWAP -n 200
perftest_one ib_atomic_bw "-q 4" -q 4 -n 200
perftest_one ib_atomic_bw "-b" -b -n 200
t_done
