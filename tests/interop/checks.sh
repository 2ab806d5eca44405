# What a case's outputs must show beyond both exit statuses (sourced).
# Each gets the log prefix L (L.host, L.hostlog: softrnic's stdout and
# debug log; L.guest: rxe's side) and the client's output file; it prints
# the note for the results table and returns non-zero on failure.

# a pingpong's client measured its run ("N bytes in S seconds" and usec/iter)
chk_pp() {
	local r
	r=$(grep -h 'usec/iter' "$2" | tail -n1)
	[ -n "$r" ] || { echo "(no usec/iter line)"; return 1; }
	echo "${r#*= }" | sed 's/^ *//'
}

# perftest's client printed a result row: bytes, iterations, figures
chk_perf() {
	local r
	r=$(grep -hE '^ +[0-9]+ +[0-9]+ +[0-9.]+' "$2" | tail -n1)
	[ -n "$r" ] || { echo "(no result row)"; return 1; }
	echo "$r" | awk '{ $1 = $1; print }'
}

# rping -v printed every ping on the client, -V checked each
chk_rping() {
	local n want=${IO_RPING_COUNT:-10}
	n=$(grep -c 'ping data' "$2")
	echo "$n/$want pings verified"
	[ "$n" -ge "$want" ]
}

# ucmatose ended its test on both sides
chk_ucma() {
	local n
	n=$(cat "$1.host" "$1.guest" | grep -c 'return status 0')
	echo "$n/2 sides returned 0"
	[ "$n" -eq 2 ]
}

# softrnic stayed with go-back-N against rxe (no selective retransmission:
# nothing held past a gap, no SR resend, no tail probe); the note shows
# how each side recovered
chk_gbn() {
	local c v bad=0 note=""
	# no dump, no verdict (rping exits without closing its device)
	[ "$(io_counter tx_packets "$1.hostlog")" -gt 0 ] || { echo "(no counters at exit)"; return 1; }
	for c in req_retx_packets req_timeouts comp_nak_seq resp_nak_seq resp_dup_request; do
		note="$note ${c}=$(io_counter "$c" "$1.hostlog")"
	done
	for c in sr_held sr_resends req_probes; do
		v=$(io_counter "$c" "$1.hostlog")
		[ "$v" -eq 0 ] || { note="$note $c=$v(!)"; bad=1; }
	done
	echo "$note" | sed 's/^ //'
	return $bad
}
# the checked stream's server found every byte, once, in order; the
# client's rate
chk_stream() {
	local v r
	v=$(cat "$1.host" "$1.guest" | grep -c 'corrupt 0, duplicate 0, out_of_order 0, missing 0, errors 0')
	r=$(grep -h 'MB/s' "$2" | tail -n1)
	echo "${r:-(no rate)}; $v verdicts clean"
	[ "$v" -ge 1 ]
}
chk_stream_gbn() { chk_stream "$@" && chk_gbn "$@"; }
chk_perf_gbn() { chk_perf "$@" && chk_gbn "$@"; }

# the data went in 4096-byte packets: softrnic's average RoCE payload per
# packet, the direction that carried the data (sent or received)
chk_mtu4096() {
	local f=$1.hostlog avg
	avg=$(awk '$2 == "tx_bytes" { tb += $3 } $2 == "tx_packets" { tp += $3 }
		$2 == "rx_bytes" { rb += $3 } $2 == "rx_packets" { rp += $3 }
		END { a = tp ? tb / tp : 0; b = rp ? rb / rp : 0; printf "%d", (a > b ? a : b) }' "$f")
	echo "avg $avg B/packet"
	[ "$avg" -gt 2048 ]
}
chk_pp_mtu() { chk_pp "$@" && chk_mtu4096 "$@"; }
chk_perf_mtu() { chk_perf "$@" && chk_mtu4096 "$@"; }
chk_rping_mtu() { chk_rping "$@" && chk_mtu4096 "$@"; }
