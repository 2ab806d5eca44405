# Middleware over softrnic beside the same middleware's own transports, in
# the same run (sourced by bench/run.sh, which provides RAW, BUILD, SOFTRNIC,
# b_pair, b_record, b_progress, b_result, ucx_record, note, have and add):
#  - UCX ucx_perftest over softrnic's verbs (UCX_TLS=rc_v: rc_verbs, with
#    ud_verbs for connection setup), against UCX_TLS=sm on one host and,
#    on the UDP path, against UCX_TLS=tcp;
#  - Open MPI (pml ucx over softrnic) against Open MPI's TCP btl, running
#    tests/mpi/mpi_check's checked ping-pong.

# step_ucx_srn PATH TEST SIZE REP: ucx_perftest over softrnic on srn_lo.
step_ucx_srn() {
	local path=$1 test=$2 size=$3 rep=$4 name="mw-ucx-$1-$2-$3-r$4" n
	b_progress "ucx_perftest rc_v over softrnic ($path) $test $size B (rep $rep)"
	case $test in
	ucp_put_bw) n=$(( (1 << 30) / size )); [ $n -gt 20000 ] && n=20000; [ $n -lt 200 ] && n=200 ;;
	*) n=20000 ;;
	esac
	B_PORT=$(b_port)
	local env="env UCX_TLS=rc_v,self UCX_NET_DEVICES=srn_lo:1"
	[ "$path" = udp ] && env="$env SOFTRNIC_TRANSPORT=udp"
	if b_pair "$name" 90 "$env $SOFTRNIC run -- ucx_perftest -p $B_PORT" \
		"$env $SOFTRNIC run -- ucx_perftest 127.0.0.1 -p $B_PORT -t $test -s $size -n $n -w 100 -f"; then
		ucx_record "mw:ucx_srn:$path:${test#ucp_}" "$size" "$test" "$RAW/$name.client"
	else
		b_result "FAILED (raw/$name.*)"
		note "ucx_perftest over softrnic ($path) $test $size failed: see raw/$name.*"
	fi
}

# step_mpi softrnic|tcp REP: 2 ranks of mpi_check on this host; records the
# 4 B one-way latency and the 1 MiB ping-pong bandwidth.
step_mpi() {
	local how=$1 rep=$2 name="mw-mpi-$1-r$2" prefix=() args
	b_progress "Open MPI ping-pong, $how (rep $rep)"
	args=(mpirun --allow-run-as-root --oversubscribe -np 2)
	if [ "$how" = softrnic ]; then
		prefix=(env UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=srn_lo:1 "$SOFTRNIC" run --)
		args+=(--mca pml ucx --mca osc ^ucx --mca btl ^openib,vader,tcp,ofi -x UCX_TLS -x UCX_NET_DEVICES)
	else
		args+=(--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo)
	fi
	# 10000 round trips of the small sizes (the 4 B figure comes after the
	# job's start-up), 1000 of the large; "fast": the transport's time, not
	# the program's byte-by-byte checking.
	if timeout -k 5 180 "${prefix[@]}" "${args[@]}" "$BUILD/tests/mpi_check" 10000 1048576 fast \
		>"$RAW/$name.out" 2>&1 && grep -q 'mpi_check: all checked' "$RAW/$name.out"; then
		local lat bw
		lat=$(awk '$1 == "pingpong" && $2 == 4 { print $4 }' "$RAW/$name.out")
		bw=$(awk '$1 == "pingpong" && $2 == 1048576 { printf "%.4g", $8 / 1000 }' "$RAW/$name.out")
		b_record "mw:mpi_$how:lat" 4 "$lat"
		b_record "mw:mpi_$how:bw" 1048576 "$bw"
		b_result "4 B $lat us, 1 MiB $bw GB/s"
	else
		b_result "FAILED (raw/$name.out)"
		note "Open MPI ping-pong ($how) failed: see raw/$name.out"
	fi
}

# The plan: each softrnic figure right beside its baseline, per repetition.
add_middleware() {
	local r
	if ! have ucx_perftest; then
		note "ucx_perftest not installed: no middleware section for UCX (apt-get install ucx-utils)."
	else
		for r in $(seq "$REPS"); do
			add step_ucx sm ucp_put_bw 1048576 "$r"
			add step_ucx_srn "$FIRST_PATH" ucp_put_bw 1048576 "$r"
			add step_ucx sm ucp_put_lat 8 "$r"
			add step_ucx_srn "$FIRST_PATH" ucp_put_lat 8 "$r"
			add step_ucx tcp ucp_put_bw 65536 "$r"
			add step_ucx_srn udp ucp_put_bw 65536 "$r"
		done
	fi
	if ! have mpirun || [ ! -x "$BUILD/tests/mpi_check" ]; then
		note "mpirun or tests/mpi_check missing: no MPI figures (apt-get install openmpi-bin libopenmpi-dev, then rebuild)."
	else
		for r in $(seq "$REPS"); do
			add step_mpi tcp "$r"
			add step_mpi softrnic "$r"
		done
	fi
}
