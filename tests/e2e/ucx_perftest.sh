#!/usr/bin/env bash
# UCX 1.13 (Debian's ucx-utils) over softrnic on srn_lo, 127.0.0.1 only:
# - ucx_info -d lists srn_lo's memory domain with rc_verbs and ud_verbs and
#   the rdmacm connection manager (the sysfs view lets UCX see the device);
# - ucx_perftest client/server over UCX_TLS=rc_v,self (rc_verbs, with
#   ud_verbs for wireup only) and ud_v,self: put bandwidth, get, tag
#   latency and bandwidth, stream bandwidth, active-message latency, UCT
#   am_lat on rc_verbs; each run's transport report must name the verbs
#   transport on srn_lo, and its result line the iterations asked for;
# - io_demo connects through rdma_cm (UCX's sockaddr path, rdmacm as the
#   only CM) and moves 1..64 KiB reads and writes with data checking (-q).
. "$(dirname "$0")/../lib/e2e.sh"
t_need ucx_perftest ucx_info io_demo

export UCX_NET_DEVICES=srn_lo:1 UCX_WARN_UNUSED_ENV_VARS=n

# --- ucx_info -d ----------------------------------------------------------
info="$T_TMP/ucx_info"
timeout -k 2 60 "$SOFTRNIC" run -- ucx_info -d >"$info" 2>&1
md=$(awk '/# Memory domain:/ { md = $4 } /# +Transport:/ && md == "srn_lo" { print $3 }' "$info" | sort -u | tr '\n' ' ')
case "$md" in
*rc_verbs*ud_verbs*) t_pass "ucx_info -d: srn_lo has $md" ;;
*) t_fail "ucx_info -d: srn_lo has rc_verbs and ud_verbs (got '$md')"; sed 's/^/    | /' "$info" | tail -30 ;;
esac
grep -q '# Connection manager: rdmacm' "$info" && t_pass "ucx_info -d: rdmacm connection manager" ||
	t_fail "ucx_info -d: rdmacm connection manager"
grep -Eq '# +Transport: (rc_mlx5|dc_mlx5|ud_mlx5)' "$info" &&
	t_fail "ucx_info -d: no mlx5 transport on a softrnic device" ||
	t_pass "ucx_info -d: mlx5 transports declined"

# --- ucx_perftest ------------------------------------------------------------
# perf NAME TLS EXPECT "ARGS": server and client; the client's report must
# show EXPECT in its endpoint configuration and a Final line of N iterations.
perf() {
	local name=$1 tls=$2 expect=$3 args=$4 port spid srv cli n
	port=$(t_port)
	n=$(echo "$args" | sed -n 's/.*-n \([0-9]*\).*/\1/p')
	UCX_TLS=$tls UCX_LOG_LEVEL=info timeout -k 2 60 "$SOFTRNIC" run -- \
		ucx_perftest -p "$port" >"$T_TMP/$name.server" 2>&1 &
	spid=$!
	sleep 1
	UCX_TLS=$tls UCX_LOG_LEVEL=info timeout -k 2 60 "$SOFTRNIC" run -- \
		ucx_perftest -p "$port" $args 127.0.0.1 >"$T_TMP/$name.client" 2>&1
	cli=$?
	wait $spid
	srv=$?
	if [ $cli -eq 0 ] && [ $srv -eq 0 ] &&
		grep -Eq "^Final: +$n +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" "$T_TMP/$name.client" &&
		grep -q -- "$expect" "$T_TMP/$name.client"; then
		t_pass "$name ($tls, $args): $(grep '^Final:' "$T_TMP/$name.client" | tr -s ' ')"
	else
		t_fail "$name ($tls, $args): exits $cli/$srv, Final of $n, '$expect' used"
		sed 's/^/    client | /' "$T_TMP/$name.client" | grep -v '^ *client | *[0-9]* ' | tail -20
		sed 's/^/    server | /' "$T_TMP/$name.server" | tail -8
	fi
}

for set in "rc_v,self rc_verbs/srn_lo:1" "ud_v,self ud_verbs/srn_lo:1"; do
	tls=${set% *}; tl=${set#* }
	perf "put_bw_8.${tls%%,*}" "$tls" "$tl" "-t ucp_put_bw -s 8 -n 5000 -w 100"
	perf "put_bw_1m.${tls%%,*}" "$tls" "$tl" "-t ucp_put_bw -s 1048576 -n 200 -w 10"
	perf "get_64k.${tls%%,*}" "$tls" "$tl" "-t ucp_get -s 65536 -n 500 -w 10"
	perf "tag_lat.${tls%%,*}" "$tls" "$tl" "-t tag_lat -s 8 -n 2000 -w 100"
	perf "tag_bw_64k.${tls%%,*}" "$tls" "$tl" "-t tag_bw -s 65536 -n 500 -w 10"
	perf "stream_bw_4k.${tls%%,*}" "$tls" "$tl" "-t stream_bw -s 4096 -n 1000 -w 10"
	perf "am_lat.${tls%%,*}" "$tls" "$tl" "-t ucp_am_lat -s 8 -n 2000 -w 100"
done
# UCT level: rc_verbs alone, no UCP wireup (its report names no transport).
perf "uct_am_lat.rc" "rc_verbs" "" "-t am_lat -x rc_verbs -d srn_lo:1 -s 8 -n 2000 -w 100"

# --- io_demo over rdma_cm -------------------------------------------------------
port=$(t_port)
export UCX_TLS=rc_v,self UCX_SOCKADDR_TLS_PRIORITY=rdmacm
UCX_LOG_LEVEL=debug timeout -k 2 60 "$SOFTRNIC" run -- io_demo -p "$port" -d 1024:65536 -q \
	>"$T_TMP/iod.server" 2>&1 &
spid=$!
sleep 1.5
UCX_LOG_LEVEL=debug timeout -k 2 60 "$SOFTRNIC" run -- io_demo -p "$port" -d 1024:65536 -q \
	-i 1000 -o read,write 127.0.0.1 >"$T_TMP/iod.client" 2>&1
cli=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
if [ $cli -eq 0 ] && grep -q 'Connected to server' "$T_TMP/iod.client" &&
	! grep -q 'corruption' "$T_TMP/iod.client" "$T_TMP/iod.server"; then
	t_pass "io_demo: 1000 checked 1-64 KiB reads and writes: $(grep 'total min' "$T_TMP/iod.client" | tail -n1 | cut -d'|' -f2-3)"
else
	t_fail "io_demo: client exit $cli, connected, no corruption"
	grep -E 'DEMO|ERROR|corruption' "$T_TMP/iod.client" | tail -15 | sed 's/^/    client | /'
fi
grep -q 'rdmacm_cm_ep.c' "$T_TMP/iod.client" && grep -q 'rdmacm_cm_ep.c' "$T_TMP/iod.server" &&
	t_pass "io_demo's connection was made by UCX's rdmacm CM on both sides" ||
	t_fail "io_demo's connection was made by UCX's rdmacm CM on both sides"
t_done
