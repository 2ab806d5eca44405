#!/usr/bin/env bash
# The interop suite: softrnic (host side, in a network namespace, on the
# bridge at 10.77.0.1) against Linux Soft-RoCE (rdma_rxe, rxe0 in a qemu
# guest at 10.77.0.2), every case in both roles.  See docs/interop.md.
#   run.sh [PHASE...]   phases: basic loss mtu (default: all three), iwarp
# With SRN_INTEROP_SIW=1 the guest gets siw.ko and the default is iwarp:
# softrnic's iWARP device against Linux SoftiWARP (siw0).
# Environment: SRN_BUILD (softrnic's build, default build/), SRN_INTEROP_DIR
# (downloads, guest, logs; default /var/tmp/softrnic-interop), IO_CASES (a
# regex: run only the cases whose name matches).
# Exit: 0 all passed, 1 a case failed, 77 not root or no qemu.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/pair.sh"
. "$HERE/checks.sh"
io_need_root_qemu
[ -x "$SOFTRNIC" ] || { echo "no $SOFTRNIC: build softrnic first" >&2; exit 1; }
[ -x "$SRN_BUILD/tests/rc_stream_check" ] || { echo "no $SRN_BUILD/tests/rc_stream_check" >&2; exit 1; }
for p in ibv_rc_pingpong ib_write_bw rping ucmatose; do
	command -v $p >/dev/null || io_skip "$p not installed"
done
if [ "${SRN_INTEROP_SIW:-0}" = 1 ]; then
	PHASES=${*:-iwarp}
else
	PHASES=${*:-basic loss mtu}
fi
export SRN_INTEROP_SIW
mkdir -p "$IO_LOGS"
# this run's logs only: the loss totals add up every loss-* log
rm -f "$IO_LOGS"/*.host "$IO_LOGS"/*.hostlog "$IO_LOGS"/*.guest "$IO_LOGS"/loss.all
T0=$SECONDS
# (re)build the guest when it is missing or older than what goes into it
if [ ! -e "$IO_OUT/initramfs.cpio.gz" ] || { [[ $PHASES == *iwarp* ]] && [ ! -e "$IO_OUT/SIW" ]; } ||
	[ -n "$(find "$HERE/build-guest.sh" "$HERE/guest" \
	"$SRN_BUILD/tests/rc_stream_check" -newer "$IO_OUT/initramfs.cpio.gz" 2>/dev/null)" ]; then
	io_log "building the guest"
	"$HERE/build-guest.sh" >"$IO_LOGS/build.log" 2>&1 ||
		{ tail -n 20 "$IO_LOGS/build.log"; exit 1; }
fi
io_net_up
HD=$IO_HDEV
# program arguments on each side: softrnic's device and GID 0 (its
# ::ffff:10.77.0.1), rxe0 and its IPv4-mapped GID, found at boot
PPH="-d $HD -g 0 -p PORT -c" PPG="-d \$IO_DEV -g \$IO_GID -p PORT -c"
PTH="-d $HD -x 0 -F -p PORT" PTG="-d \$IO_DEV -x \$IO_GID -F -p PORT"
# guest_at MTU [KERNEL_ARGS]: boots (again) when the phase needs another
# MTU or stack (io_siw=1) than the running guest's
IO_BOOTED=""
guest_at() {
	[ "$IO_BOOTED" = "$*" ] && return 0
	io_poweroff
	IO_BOOTED=$*
	io_boot "$@" || { io_result FAIL "boot-mtu$1${2:+-$2}" 0 "guest did not boot"; return 1; }
}
# the checked stream: the client sends, the server checks every byte
SCH="$SRN_BUILD/tests/rc_stream_check -d $HD -g 0 -p PORT -T 150"
SCG="rc_stream_check -d \$IO_DEV -g \$IO_GID -p PORT -T 150"
case_on() { [[ $1 =~ ${IO_CASES:-.} ]]; }
both() { case_on "$1" && io_both "$@"; }

phase_basic() {
	local p
	guest_at 1500 || return
	for p in rc uc; do
		both ${p}_pingpong-4k 120 "ibv_${p}_pingpong $PPH -s 4096 -n 20" \
			"ibv_${p}_pingpong $PPG -s 4096 -n 20" chk_pp
	done
	both ud_pingpong-1000 120 "ibv_ud_pingpong $PPH -s 1000 -n 20" \
		"ibv_ud_pingpong $PPG -s 1000 -n 20" chk_pp
	for p in write read send; do
		both ib_${p}_bw-64k 180 "ib_${p}_bw $PTH -s 65536 -n 50" \
			"ib_${p}_bw $PTG -s 65536 -n 50" chk_perf
	done
	for p in FETCH_AND_ADD CMP_AND_SWAP; do
		both ib_atomic_bw-$p 180 "ib_atomic_bw $PTH -A $p -n 50" \
			"ib_atomic_bw $PTG -A $p -n 50" chk_perf
	done
	for p in write send; do
		both ib_${p}_lat-2 180 "ib_${p}_lat $PTH -s 2 -n 50" "ib_${p}_lat $PTG -s 2 -n 50" chk_perf
		both ib_${p}_lat-8k 180 "ib_${p}_lat $PTH -s 8192 -n 20" \
			"ib_${p}_lat $PTG -s 8192 -n 20" chk_perf
	done
	IO_RPING_COUNT=10 both rping-4000 180 "rping -C 10 -V -v -S 4000 -p PORT" \
		"rping -C 10 -V -v -S 4000 -p PORT" chk_rping "-s -a IP" "-c -a IP"
	both ucmatose 180 "ucmatose -c 2 -C 10 -p PORT" "ucmatose -c 2 -C 10 -p PORT" chk_ucma \
		"-b IP" "-s IP"
	both rc_stream-mix-4m 180 "$SCH" "$SCG" chk_stream "" "-t rc -o mix -m 4 IP"
	both ib_write_bw-R 180 "ib_write_bw $PTH -R -s 65536 -n 50" \
		"ib_write_bw $PTG -R -s 65536 -n 50" chk_perf
}

# 1% loss each way, netem in the guest: on eth0's egress (what rxe sends)
# and, through ifb0, on its ingress (what softrnic sends: the guest sees
# single packets, where a filter on this host would see softrnic's GSO
# batches; this host's kernel has no netem anyway).  /usr/sbin/tc and ip
# are iproute2's: busybox's shell prefers its own applets, which know no
# netem or ifb.
LOSS_ON='/usr/sbin/tc qdisc add dev eth0 root netem loss 1% && { /usr/sbin/ip link show ifb0 >/dev/null 2>&1 || /usr/sbin/ip link add ifb0 type ifb; } && /usr/sbin/ip link set ifb0 up && /usr/sbin/tc qdisc add dev eth0 handle ffff: ingress && /usr/sbin/tc filter add dev eth0 parent ffff: matchall action mirred egress redirect dev ifb0 && /usr/sbin/tc qdisc add dev ifb0 root netem loss 1%'
LOSS_OFF='/usr/sbin/tc qdisc del dev eth0 root; /usr/sbin/tc qdisc del dev eth0 ingress; /usr/sbin/tc qdisc del dev ifb0 root'
# dropped DEV: what netem on DEV in the guest dropped so far
dropped() { io_guest 20 "/usr/sbin/tc -s qdisc show dev $1" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -n1; }
phase_loss() {
	local L=$IO_LOGS/loss c p out in srn rxe
	guest_at 1500 || return
	io_guest 30 "$LOSS_ON" || { io_result FAIL loss/netem 0 "netem set-up failed"; return; }
	# rping exits without closing its device: no counters to check
	IO_RPING_COUNT=20 both loss-rping-16000 300 "rping -C 20 -V -v -S 16000 -p PORT" \
		"rping -C 20 -V -v -S 16000 -p PORT" chk_rping "-s -a IP" "-c -a IP"
	for p in send write; do
		both loss-rc_stream-$p-4m 300 "$SCH" "$SCG" chk_stream_gbn "" "-t rc -o $p -m 4 IP"
	done
	for p in write read; do
		both loss-ib_${p}_bw-64k 300 "ib_${p}_bw $PTH -s 65536 -n 100" \
			"ib_${p}_bw $PTG -s 65536 -n 100" chk_perf_gbn
	done
	# what netem dropped each way, and how both stacks recovered in all
	out=$(dropped eth0) in=$(dropped ifb0)
	rxe=$(io_guest 20 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for c in rcvd_seq_err out_of_seq_request duplicate_request completer_retry_err retry_exceeded_err; do printf "%s=%s " $c $(cat $c); done; echo')
	io_guest 30 "$LOSS_OFF"
	cat "$IO_LOGS"/loss-*.hostlog >"$L.all" 2>/dev/null
	srn=""
	for c in req_retx_packets comp_nak_seq resp_nak_seq resp_dup_request req_timeouts comp_read_gap; do
		srn="$srn $c=$(io_counter $c "$L.all")"
	done
	io_log "loss: netem dropped ${out:-?} packets rxe sent, ${in:-?} softrnic sent"
	io_log "loss: softrnic$srn"
	io_log "loss: rxe $rxe"
	[ "${out:-0}" -gt 0 ] && [ "${in:-0}" -gt 0 ]
	io_result $([ $? -eq 0 ] && echo PASS || echo FAIL) loss/both-directions-lost 0 \
		"netem dropped ${out:-?} rxe packets, ${in:-?} softrnic packets"
	# softrnic's responder NAKed rxe's gaps; its requester went back on
	# rxe's NAKs (go-back-N) or its own timeouts
	[ "$(io_counter resp_nak_seq "$L.all")" -gt 0 ] && [ "$(io_counter comp_nak_seq "$L.all")" -gt 0 ] &&
		[ "$(io_counter req_retx_packets "$L.all")" -gt 0 ]
	io_result $([ $? -eq 0 ] && echo PASS || echo FAIL) loss/srn-recovered-both-ways 0 "${srn# }"
}

phase_mtu() {
	local m
	guest_at 9000 || return
	m=$(io_guest 20 'ibv_devinfo -d $IO_DEV' | awk '/active_mtu/ {print $2}')
	[ "$m" = 4096 ]
	io_result $([ $? -eq 0 ] && echo PASS || echo FAIL) mtu/rxe-active-mtu 0 "rxe0 active_mtu $m"
	both mtu4096-rc_pingpong-16k 120 "ibv_rc_pingpong $PPH -m 4096 -s 16384 -n 20" \
		"ibv_rc_pingpong $PPG -m 4096 -s 16384 -n 20" chk_pp_mtu
	both mtu4096-ud_pingpong-4000 120 "ibv_ud_pingpong $PPH -s 4000 -n 20" \
		"ibv_ud_pingpong $PPG -s 4000 -n 20" chk_pp
	both mtu4096-ib_write_bw-64k 180 "ib_write_bw $PTH -m 4096 -s 65536 -n 50" \
		"ib_write_bw $PTG -m 4096 -s 65536 -n 50" chk_perf_mtu
	IO_RPING_COUNT=10 both mtu4096-rping-16000 180 "rping -C 10 -V -v -S 16000 -p PORT" \
		"rping -C 10 -V -v -S 16000 -p PORT" chk_rping "-s -a IP" "-c -a IP"
}

# softrnic's iWARP device (srn_ioPID on the bridge, SOFTRNIC_DEVICES=siobr0:iwarp=)
# against siw0 in the guest: rdma_cm over TCP + MPA, then SEND, WRITE and
# READ; perftest -R (rdma_cm, which iWARP needs) without a GID index
phase_iwarp() {
	local p s PR="-F -p PORT -R"
	[ -e "$IO_OUT/SIW" ] || { io_result FAIL iwarp/siw-built 0 "no siw.ko in the guest (SRN_INTEROP_SIW=1)"; return; }
	guest_at 1500 io_siw=1 || return
	[ "$(io_guest 20 'echo $IO_DEV')" = siw0 ]
	io_result $([ $? -eq 0 ] && echo PASS || echo FAIL) iwarp/siw0 0 "$(cat "$IO_OUT/SIW")"
	IO_PEER=siw IO_IWARP=1
	for s in 64 4000 65535; do
		IO_RPING_COUNT=10 both iw-rping-$s 180 "rping -C 10 -V -v -S $s -p PORT" \
			"rping -C 10 -V -v -S $s -p PORT" chk_rping "-s -a IP" "-c -a IP"
	done
	for p in send write read; do
		both iw-ib_${p}_bw-R-64k 180 "ib_${p}_bw -d $HD $PR -s 65536 -n 50" \
			"ib_${p}_bw -d \$IO_DEV $PR -s 65536 -n 50" chk_perf
	done
	for p in write read; do
		both iw-ib_${p}_bw-R-1m-b 240 "ib_${p}_bw -d $HD $PR -b -s 1048576 -n 20" \
			"ib_${p}_bw -d \$IO_DEV $PR -b -s 1048576 -n 20" chk_perf
	done
	# softrnic asks for the MPA CRC: siw MUST use it both ways
	IO_HOST_ENV=SOFTRNIC_IWARP_CRC=1
	IO_RPING_COUNT=10 both iw-crc-rping-4000 180 "rping -C 10 -V -v -S 4000 -p PORT" \
		"rping -C 10 -V -v -S 4000 -p PORT" chk_rping "-s -a IP" "-c -a IP"
	for p in write read; do
		both iw-crc-ib_${p}_bw-R-64k 180 "ib_${p}_bw -d $HD $PR -s 65536 -n 50" \
			"ib_${p}_bw -d \$IO_DEV $PR -s 65536 -n 50" chk_perf
	done
	IO_PEER=rxe IO_IWARP=0 IO_HOST_ENV=""
}

io_log "softrnic $SRN_BUILD, guest $IO_OUT ($(cat "$IO_OUT/KVER")), logs $IO_LOGS"
for ph in $PHASES; do
	t=$SECONDS
	io_log "phase $ph"
	"phase_$ph"
	io_log "phase $ph: $((SECONDS - t)) s"
done
io_poweroff
echo
echo "== interop results ($((SECONDS - T0)) s)"
printf '%s\n' "${IO_RESULTS[@]}"
echo "$IO_PASSES passed, $IO_FAILS failed"
[ "$IO_FAILS" -eq 0 ] && [ "$IO_PASSES" -gt 0 ]
