#!/usr/bin/env bash
# The server's interface goes down for 1 s and comes back in the middle of
# an RC stream between two hosts: two network namespaces this test
# creates, joined by a veth pair (192.168.95.0/24, addresses only inside
# them).  rc_stream_check, paced to run before, through and after the
# flap, moves checked SENDs and WRITEs and must complete intact: traffic
# resumes once the link is back (the kernel restores the subnet's route
# when vA comes up).  The port follows the interface
# (transport/link_watch.c): the server, whose vA is set down, must get
# IBV_EVENT_PORT_ERR with its port DOWN and Disabled (phys 3), then
# IBV_EVENT_PORT_ACTIVE with it ACTIVE and LinkUp (5); the client's vB
# only loses carrier, so its port goes DOWN and Polling (2) meanwhile.
# Traffic must resume after the flap: the stream completes intact.
# FAULT_LONG=1 moves 256 MiB.  Root only; skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/fault.sh"
fault_direct fk 192.168.95
fault_nft

link() { ip -n "$NA" link set vA "$1"; }
fault_through flap "vA down for 1 s" "link down" "link up" 1

# port_events SIDE: the port events SIDE's log shows, in order, one a line
port_events() {
	sed -n 's/^rc_stream_check: async event: \(port [a-z]*\) (port 1: \([a-z]*\), phys \([0-9]*\))$/\1 \2 \3/p' \
		"$T_TMP/flap.$1.log"
}
srv=$(port_events server | tr '\n' ';')
cli=$(port_events client | tr '\n' ';')
echo "  port events: server: $srv client: $cli"
expect="port error down 3;port active active 5;"
[ "$srv" = "$expect" ] && t_pass "server: PORT_ERR (DOWN, Disabled) then PORT_ACTIVE (ACTIVE, LinkUp)" ||
	{ t_fail "server port events '$srv', expected '$expect'"
	  grep -E 'link|async event|close' "$T_TMP/flap.server.log" | sed 's/^/    server | /' | tail -20; }
# The kernel may hold a carrier-on notice up to 1 s (linkwatch): the
# client's PORT_ACTIVE may come after its stream ended.
case "$cli" in
"port error down 2;port active active 5;" | "port error down 2;")
	t_pass "client: PORT_ERR (DOWN, Polling: its peer lost)${cli#*;}" ;;
*)	t_fail "client port events '$cli', expected PORT_ERR (down, phys 2) [then PORT_ACTIVE]" ;;
esac
t_done
