#!/usr/bin/env bash
# perftest over the iWARP device with rdma_cm (-R, which iWARP needs):
# ib_send_bw, ib_write_bw and ib_read_bw between two processes on
# 127.0.0.1, each connection TCP + MPA, then SEND/RECV, RDMA WRITE and
# RDMA READ over the FPDU stream, one way and both ways at once (-b).
# Runs once: iWARP is TCP whatever SOFTRNIC_TRANSPORT says.
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_send_bw ib_write_bw ib_read_bw
export SOFTRNIC_DEVICES=lo:iwarp PERFTEST_DEV=srn_iw_lo PERFTEST_SECS=120
perftest_one ib_send_bw "-R" -R -n 500
perftest_one ib_write_bw "-R" -R -n 500
perftest_one ib_read_bw "-R" -R -n 500
perftest_one ib_write_bw "-R -a (2 B .. 8 MiB)" -R -a -n 20
perftest_one ib_read_bw "-R -a (2 B .. 8 MiB)" -R -a -n 20
perftest_one ib_send_bw "-R -a (2 B .. 8 MiB)" -R -a -n 20
# Bidirectional: both sides post at once, so both sockets fill; each
# side's receive thread must keep draining while its sender waits on TCP
# (before the sender thread, READ and WRITE floods of 4 MiB stalled).
for s in 65536 1048576 4194304; do
	perftest_one ib_read_bw "-R -b -s $s" -R -b -s "$s" -n 50
	perftest_one ib_write_bw "-R -b -s $s" -R -b -s "$s" -n 50
done
perftest_one ib_send_bw "-R -b -s 4194304" -R -b -s 4194304 -n 50
# both ends ask for the MPA CRC32c: every FPDU computed and checked
SOFTRNIC_IWARP_CRC=1 perftest_one ib_read_bw "-R -b -s 1048576, CRC" -R -b -s 1048576 -n 50
SOFTRNIC_IWARP_CRC=1 perftest_one ib_send_bw "-R -s 65536, CRC" -R -s 65536 -n 200
t_done
