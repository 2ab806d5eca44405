# rping_one LABEL COUNT EXTRA-ARGS...: Debian's rping server and client on
# 127.0.0.1 (sourced by tests/e2e/rping.sh and iwarp_rping.sh, after
# tests/lib/e2e.sh): passes when both exit 0 having verified (-V) COUNT pings.
rping_one() { # label count extra-args...
	local label=$1 count=$2; shift 2
	local port; port=$(t_port)
	local name="rping$port"
	if t_pair "$name" "${T_RPING_SECS:-30}" "rping -s -a 127.0.0.1 -p $port -C $count -v -V $*" \
			   "rping -c -a 127.0.0.1 -p $port -C $count -v -V $*"; then
		local c s
		c=$(grep -c "^ping data: rdma-ping-" "$T_TMP/$name.client")
		s=$(grep -c "^server ping data: rdma-ping-" "$T_TMP/$name.server")
		if [ "$c" -eq "$count" ] && [ "$s" -eq "$count" ]; then
			t_pass "rping $label: $count pings verified on both sides, both exit 0"
		else
			t_fail "rping $label: client saw $c, server $s of $count pings"
		fi
	else
		t_fail "rping $label"
	fi
}
