#!/usr/bin/env bash
# Debian's unmodified ib_atomic_lat over softrnic (RC, srn_lo, GID 0).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_atomic_lat
perftest_one ib_atomic_lat "FETCH_AND_ADD" -A FETCH_AND_ADD -n 500
perftest_one ib_atomic_lat "CMP_AND_SWAP" -A CMP_AND_SWAP -n 500
t_done
