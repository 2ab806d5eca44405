# Two "hosts" for tests/e2e (sourced after e2e.sh): network namespaces NA
# and NB that the test creates, joined by a veth pair vA <-> vB whose
# addresses exist only inside them.  Root only; skips (77) otherwise.
# The host's own interfaces are never touched; a trap removes both.

# t_netns_up PREFIX SUBNET: namespaces PREFIX{A,B}<pid>, vA = SUBNET.1/24
# in NA, vB = SUBNET.2/24 in NB, all links up.
t_netns_up() {
	local prefix=$1 subnet=$2
	[ "$(id -u)" -eq 0 ] || t_skip "needs root for ip netns"
	t_need ip timeout
	ip netns list >/dev/null 2>&1 || t_skip "ip netns not usable"
	NA="${prefix}A$$"; NB="${prefix}B$$"
	trap 't_netns_down' EXIT
	ip netns add "$NA" && ip netns add "$NB" || t_skip "cannot create namespaces"
	# The veth pair is created inside NA with its peer moved straight into NB.
	ip -n "$NA" link add vA type veth peer name vB netns "$NB" || t_skip "no veth support"
	ip -n "$NA" addr add "$subnet.1/24" dev vA
	ip -n "$NB" addr add "$subnet.2/24" dev vB
	for n in "$NA" "$NB"; do ip -n "$n" link set lo up; done
	ip -n "$NA" link set vA up
	ip -n "$NB" link set vB up
}

t_netns_down() {
	ip netns del "$NA" 2>/dev/null
	ip netns del "$NB" 2>/dev/null
	rm -rf "$T_TMP"
}

# t_ns_pair NAME SECS "SERVER CMD" "CLIENT CMD": server through softrnic in
# NA (stdout in NAME.server, stderr with SOFTRNIC_LOG=debug in
# NAME.server.log), client in NB (NAME.client).  0 when both exit 0.
t_ns_pair() {
	local name=$1 secs=$2 scmd=$3 ccmd=$4 spid srv cli
	SOFTRNIC_LOG=debug SOFTRNIC_DEVICES=vA timeout -k 2 "$secs" \
		ip netns exec "$NA" "$SOFTRNIC" run -- $scmd \
		>"$T_TMP/$name.server" 2>"$T_TMP/$name.server.log" &
	spid=$!
	sleep 0.5
	SOFTRNIC_DEVICES=vB timeout -k 2 "$secs" ip netns exec "$NB" "$SOFTRNIC" run -- $ccmd \
		>"$T_TMP/$name.client" 2>&1
	cli=$?
	wait $spid
	srv=$?
	if [ $srv -ne 0 ] || [ $cli -ne 0 ]; then
		echo "  server ($scmd) exit $srv:"; sed 's/^/    | /' "$T_TMP/$name.server" | tail -15
		grep -i "cm\b\|CM MAD\|drop" "$T_TMP/$name.server.log" | sed 's/^/    | /' | tail -10
		echo "  client ($ccmd) exit $cli:"; sed 's/^/    | /' "$T_TMP/$name.client" | tail -15
		return 1
	fi
	return 0
}

# t_netns_devs TAG: device names of this run for vA and vB, DA and DB
# (srn_TAG<pid>a/b), whose files in /dev/shm (registry, inboxes) go with
# the namespaces.  The registry and inboxes are named after the device: a
# namespace pair of another test with the same interface names would share
# them otherwise.
t_netns_devs() {
	DA="srn_$1$$a"; DB="srn_$1$$b"
	trap 't_netns_down; rm -f /dev/shm/softrnic-"$DA"-* /dev/shm/softrnic-"$DB"-*' EXIT
}
