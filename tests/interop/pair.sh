# One interop case (sourced after lib.sh): a server and a client, one of
# them softrnic in the namespace, the other kernel rxe in the guest.
IO_PASSES=0 IO_FAILS=0 IO_RESULTS=()
IO_PORT=${IO_PORT:-20100} IO_CASE_PORT=0
IO_READY_SECS=${IO_READY_SECS:-60}
IO_PEER=rxe # the guest's stack, in case names: rxe, or siw (phase iwarp)

io_result() { # PASS|FAIL NAME SECS NOTE
	printf '%-4s %-34s %4ss  %s\n' "$1" "$2" "$3" "$4"
	IO_RESULTS+=("$(printf '%-4s %-34s %4ss  %s' "$1" "$2" "$3" "$4")")
	if [ "$1" = PASS ]; then IO_PASSES=$((IO_PASSES + 1)); else IO_FAILS=$((IO_FAILS + 1)); fi
}

# io_host_ready PORT: softrnic's server listens on TCP PORT (its
# out-of-band exchange), or 2 s went by (an rdma_cm listener of softrnic
# is not the kernel's to show)
io_host_ready() {
	local i
	for ((i = 0; i < 10; i++)); do
		io_ns ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.2
	done
}

# io_pair NAME SERVER SECS "HOST CMD" "GUEST CMD" [CHECK]: SERVER (host or
# guest) starts first; rxe's client retries until softrnic's server
# answers, softrnic's client waits until rxe's server listens on
# IO_CASE_PORT.  Passes when both exit 0 and CHECK (a function given the log
# prefix and the client's output file) returns 0; CHECK's output is the
# note.  Logs: $IO_LOGS/NAME.{host,hostlog,guest}.
io_pair() {
	local name=$1 srv=$2 secs=$3 hcmd=$4 gcmd=$5 check=${6:-} t0=$SECONDS
	local L="$IO_LOGS/${name//\//-}" hpid hrc grc cli note=""
	if [ "$srv" = host ]; then
		io_host "$secs" $hcmd >"$L.host" 2>"$L.hostlog" &
		hpid=$! IO_HOST_PID=$!
		io_host_ready "$IO_CASE_PORT"
		io_guest $((secs + 30)) "io-retry 5 timeout $secs $gcmd" >"$L.guest" 2>&1
		grc=$?
		wait "$hpid"
		hrc=$? IO_HOST_PID=""
		cli=$L.guest
	else
		io_guest 20 "io-bg srv $secs $gcmd" >"$L.guest" 2>&1
		# one attempt, once the server listens: a retried client may meet
		# a server that took the failed attempt's connection
		io_guest $((IO_READY_SECS + 10)) "io-ready $IO_CASE_PORT $IO_READY_SECS" >>"$L.guest" 2>&1
		io_host "$secs" $hcmd >"$L.host" 2>"$L.hostlog"
		hrc=$?
		io_guest $((secs + 30)) "io-wait srv $secs" >"$L.guest" 2>&1
		grc=$?
		cli=$L.host
	fi
	local ok=0
	[ $hrc -eq 0 ] && [ $grc -eq 0 ] && note=$(${check:-true} "$L" "$cli") && ok=1
	note=${note//$'\n'/; }
	if [ $ok -eq 1 ]; then
		io_result PASS "$name" $((SECONDS - t0)) "$note"
		return 0
	fi
	io_result FAIL "$name" $((SECONDS - t0)) "softrnic exit $hrc, $IO_PEER exit $grc $note"
	echo "    softrnic ($hcmd):"; tail -n 12 "$L.host" | sed 's/^/    | /'
	grep -v '^softrnic\[[0-9]*\]: [a-z_0-9]* [0-9]*$' "$L.hostlog" | tail -n 8 | sed 's/^/    | /'
	echo "    $IO_PEER ($gcmd):"; tail -n 12 "$L.guest" | sed 's/^/    | /'
	return 1
}

# io_both NAME SECS "HOST ARGS" "GUEST ARGS" CHECK SERVER_ARGS CLIENT_ARGS:
# the case twice, softrnic as server (NAME/srn-srv) and rxe as server
# (NAME/rxe-srv).  SERVER_ARGS go after the server's arguments,
# CLIENT_ARGS (default: the server's address) after the client's; in
# all of them PORT is the case's port and IP the server's address.
io_both() {
	local name=$1 secs=$2 hargs=$3 gargs=$4 check=${5:-} sx=${6:-} cx=${7:-IP}
	IO_PORT=$((IO_PORT + 1))
	IO_CASE_PORT=$IO_PORT
	io_pair "$name/srn-srv" host "$secs" "${hargs//PORT/$IO_PORT} ${sx//IP/$IO_HOST_IP}" \
		"${gargs//PORT/$IO_PORT} ${cx//IP/$IO_HOST_IP}" "$check"
	IO_PORT=$((IO_PORT + 1))
	IO_CASE_PORT=$IO_PORT
	io_pair "$name/$IO_PEER-srv" guest "$secs" "${hargs//PORT/$IO_PORT} ${cx//IP/$IO_GUEST_IP}" \
		"${gargs//PORT/$IO_PORT} ${sx//IP/$IO_GUEST_IP}" "$check"
}
