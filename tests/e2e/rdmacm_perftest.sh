#!/usr/bin/env bash
# perftest connecting through rdma_cm (-R): ib_write_bw, ib_send_lat and
# ib_read_bw over softrnic's librdmacm (REQ/REP/RTU on QP1 set up the RC QPs).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_write_bw ib_send_lat ib_read_bw
perftest_one ib_write_bw "-R" -R -n 200
perftest_one ib_send_lat "-R" -R -n 200
perftest_one ib_read_bw "-R" -R -n 200
t_done
