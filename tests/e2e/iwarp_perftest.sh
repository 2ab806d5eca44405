#!/usr/bin/env bash
# perftest over the iWARP device with rdma_cm (-R, which iWARP needs):
# ib_send_bw, ib_write_bw and ib_read_bw between two processes on
# 127.0.0.1, each connection TCP + MPA, then SEND/RECV, RDMA WRITE and
# RDMA READ over the FPDU stream.  Runs once: iWARP is TCP whatever
# SOFTRNIC_TRANSPORT says.
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_send_bw ib_write_bw ib_read_bw
export SOFTRNIC_DEVICES=lo:iwarp PERFTEST_DEV=srn_iw_lo PERFTEST_SECS=120
perftest_one ib_send_bw "-R" -R -n 500
perftest_one ib_write_bw "-R" -R -n 500
perftest_one ib_read_bw "-R" -R -n 500
perftest_one ib_write_bw "-R -a (2 B .. 8 MiB)" -R -a -n 20
perftest_one ib_read_bw "-R -a (2 B .. 8 MiB)" -R -a -n 20
perftest_one ib_send_bw "-R -a (2 B .. 8 MiB)" -R -a -n 20
t_done
