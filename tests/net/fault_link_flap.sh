#!/usr/bin/env bash
# The server's interface goes down for 1 s and comes back in the middle of
# an RC stream between two hosts: two network namespaces this test
# creates, joined by a veth pair (192.168.95.0/24, addresses only inside
# them).  rc_stream_check, paced to run before, through and after the
# flap, moves checked SENDs and WRITEs and must complete intact: traffic
# resumes once the link is back (the kernel restores the subnet's route
# when vA comes up).  Both sides watch the device's async events; the
# port events they saw (IBV_EVENT_PORT_ERR / PORT_ACTIVE) are printed,
# not asserted: softrnic does not watch its interface's link yet.
# FAULT_LONG=1 moves 256 MiB.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/fault.sh"
fault_direct fk 192.168.95
fault_nft

link() { ip -n "$NA" link set vA "$1"; }
fault_through flap "vA down for 1 s" "link down" "link up" 1
echo "  port events: server $(sed -n 's/.*port_events \([0-9]*\).*/\1/p' "$T_TMP/flap.server"),\
 client (both sides) $(sed -n 's/.*port_events \([0-9]*\).*/\1/p' "$T_TMP/flap.client" | head -1);\
 async events: $(grep -h 'async event' "$T_TMP"/flap.*.log | sort | uniq -c | tr '\n' ' ')"
t_done
