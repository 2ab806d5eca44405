#!/usr/bin/env bash
# Debian's unmodified perftest over XRC (-c XRC: XRC send/receive QPs and an
# XRC SRQ per side, srn_lo, GID 0): SEND, WRITE and READ bandwidth, SEND and
# WRITE latency (docs/xrc.md).
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_send_bw ib_write_bw ib_read_bw ib_send_lat ib_write_lat
perftest_one ib_send_bw "-c XRC -a" -c XRC -a -n 20
perftest_one ib_send_bw "-c XRC -q 4" -c XRC -q 4 -n 200
perftest_one ib_write_bw "-c XRC -a" -c XRC -a -n 20
perftest_one ib_write_bw "-c XRC -s 65536" -c XRC -s 65536 -n 500
perftest_one ib_read_bw "-c XRC -a" -c XRC -a -n 20
perftest_one ib_send_lat "-c XRC -s 2" -c XRC -s 2 -n 1000
perftest_one ib_send_lat "-c XRC -a" -c XRC -a -n 20
perftest_one ib_write_lat "-c XRC -s 2" -c XRC -s 2 -n 1000
t_done
