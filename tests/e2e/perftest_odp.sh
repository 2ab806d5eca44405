#!/usr/bin/env bash
# Debian's unmodified perftest with --odp: its buffers registered with
# IBV_ACCESS_ON_DEMAND (perftest first checks the ODP caps that
# ibv_query_device_ex reports). On the same-host path the peer reaches
# them through process_vm_* (ODP MRs are never re-backed), so this runs
# that path for WRITE, READ and SEND too. (perftest refuses atomics with
# --odp itself: "ODP does not support ATOMICS for now".)
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_write_bw
perftest_one ib_write_bw "--odp -a" --odp -a -n 20
perftest_one ib_write_bw "--odp -q 2 -s 1 MiB" --odp -q 2 -s 1048576 -n 100
perftest_one ib_read_bw "--odp" --odp -n 200
perftest_one ib_send_bw "--odp" --odp -n 200
perftest_one ib_write_lat "--odp" --odp -n 1000
t_done
