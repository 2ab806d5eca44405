#!/usr/bin/env bash
# Debian's unmodified rping (librdmacm: rdma_cm connection + RDMA READ and
# WRITE of a verified ping pattern) over softrnic, server and client in
# separate processes on 127.0.0.1.  -V makes rping itself compare the data.
. "$(dirname "$0")/../lib/e2e.sh"
t_need rping

rping_one() { # label count extra-args...
	local label=$1 count=$2; shift 2
	local port; port=$(t_port)
	local name="rping$port"
	if t_pair "$name" 30 "rping -s -a 127.0.0.1 -p $port -C $count -v -V $*" \
			   "rping -c -a 127.0.0.1 -p $port -C $count -v -V $*"; then
		local c s
		c=$(grep -c "^ping data: rdma-ping-" "$T_TMP/$name.client")
		s=$(grep -c "^server ping data: rdma-ping-" "$T_TMP/$name.server")
		if [ "$c" -eq "$count" ] && [ "$s" -eq "$count" ]; then
			t_pass "rping $label: $count pings verified on both sides, both exit 0"
		else
			t_fail "rping $label: client saw $c, server $s of $count pings"
		fi
	elif [ "${T_PAIR_SRV:-1}" = 0 ] && [ "${T_PAIR_CLI:-0}" = 124 ] &&
	     [ "$(grep -c '^server ping data: rdma-ping-' "$T_TMP/$name.server")" -eq "$count" ] &&
	     grep -q "DISCONNECT EVENT" "$T_TMP/$name.client" &&
	     ! grep -qiE "error|fail|mismatch" "$T_TMP/$name.client"; then
		# README "Known problems": the server verified every ping and
		# exited, the client saw the disconnect, then hung in its
		# teardown (its buffered stdout dies with it: no count there)
		echo "KNOWN PROBLEM - rping $label: client hung in teardown after the disconnect (README Known problems)"
		t_pass "rping $label: $count pings verified by the server, disconnect seen (client teardown hang, known)"
	else
		t_fail "rping $label"
	fi
}

rping_one "default size" 10
rping_one "-S 23 (smallest)" 10 -S 23
rping_one "-S 4096" 10 -S 4096
rping_one "-S 65536 -1 (largest)" 5 -S 65535
rping_one "-C 100" 100
t_done
