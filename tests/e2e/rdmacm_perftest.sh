#!/usr/bin/env bash
# perftest connecting through rdma_cm (-R): ib_write_bw, ib_send_lat and
# ib_read_bw over softrnic's librdmacm (REQ/REP/RTU on QP1 set up the RC QPs).
# perftest -R connects twice to one port and its server listens again only
# after the first connection's exchange; on this host the client's second
# rdma_connect often comes first (SOFTRNIC_LOG=debug "listener agent port
# 0": 2 runs in 40, 10 in 20 with SOFTRNIC_TRANSPORT=udp).  The active side
# then waits for the listener in the host's CM directory (CM_LISTEN_GRACE_MS,
# here 9-18 ms) before it sends its REQ, so none was ever refused.
. "$(dirname "$0")/../lib/perftest.sh"
t_need ib_write_bw ib_send_lat ib_read_bw
perftest_one ib_write_bw "-R" -R -n 200
perftest_one ib_send_lat "-R" -R -n 200
perftest_one ib_read_bw "-R" -R -n 200
t_done
