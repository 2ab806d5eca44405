#!/usr/bin/env bash
# Debian's unmodified rping (librdmacm: rdma_cm connection + RDMA READ and
# WRITE of a verified ping pattern) over softrnic, server and client in
# separate processes on 127.0.0.1.  -V makes rping itself compare the data.
# Both must exit on their own: the client's teardown (rdma_disconnect, its
# CQ thread's join, ibv_dereg_mr of buffers that share a heap page with
# librdmacm's objects, rdma_destroy_id) once hung here; see
# tests/api/test_cm_teardown_mr.c.
. "$(dirname "$0")/../lib/e2e.sh"
t_need rping

. "$(dirname "$0")/../lib/rping.sh"

rping_one "default size" 10
rping_one "-S 23 (smallest)" 10 -S 23
rping_one "-S 4096" 10 -S 4096
rping_one "-S 65536 -1 (largest)" 5 -S 65535
rping_one "-C 100" 100
# rping's CQs have a completion channel: by default a same-host sender
# delivers into them directly and wakes the receiver (which made the hang
# above frequent); a few short runs the other way, SENDs as packets.
export SOFTRNIC_DIRECT_CHANNEL=0
for i in 1 2 3; do
	rping_one "SOFTRNIC_DIRECT_CHANNEL=0 #$i" 3
done
unset SOFTRNIC_DIRECT_CHANNEL
t_done
