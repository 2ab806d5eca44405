# Runs one perftest program (server + client on srn_lo through softrnic)
# in the configurations issue 3 asks for; perftest's own checks decide:
# both sides exit 0 and the client prints a full result table.
# Usage (from a test script): perftest_suite PROG "extra configs..."
. "$(dirname "${BASH_SOURCE[0]}")/e2e.sh"

perftest_one() { # prog label args...  (PERFTEST_SECS: time limit, default 240;
	# PERFTEST_GID: the -x GID index, default 0; PERFTEST_DEV: the device, srn_lo)
	local prog=$1 label=$2; shift 2
	local port; port=$(t_port)
	local common="-d ${PERFTEST_DEV:-srn_lo} -x ${PERFTEST_GID:-0} -F -p $port $*"
	if t_pair "$prog$port" "${PERFTEST_SECS:-240}" "$prog $common" "$prog $common 127.0.0.1" &&
	   grep -q "#bytes" "$T_TMP/$prog$port.client" &&
	   [ "$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$T_TMP/$prog$port.client")" -ge 1 ]; then
		local rows; rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$T_TMP/$prog$port.client")
		t_pass "$prog $label ($rows result rows)"
		grep -E '^ +[0-9]+ +[0-9]+ ' "$T_TMP/$prog$port.client" | tail -2 | sed 's/^/       /'
	else
		t_fail "$prog $label"
	fi
}
