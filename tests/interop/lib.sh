# Shared by tests/interop/*.sh (sourced): where the bed keeps its files,
# the private network, the guest's life cycle and the command channel to it.
# Root only; every qemu, namespace and process it starts is removed by
# io_cleanup, which the EXIT trap runs.
set -u
IO_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRN_SOURCE=${SRN_SOURCE:-$(cd "$IO_SRC/../.." && pwd)}
SRN_BUILD=${SRN_BUILD:-$SRN_SOURCE/build}
SOFTRNIC="$SRN_BUILD/bin/softrnic"
# Downloads, the guest image and logs: outside the source tree.
IO_DIR=${SRN_INTEROP_DIR:-/var/tmp/softrnic-interop}
IO_OUT="$IO_DIR/out"
IO_CACHE="$IO_DIR/cache"

io_skip() { echo "SKIP: $*"; exit 77; }
io_log() { echo "[interop $(date +%H:%M:%S)] $*"; }
# io_need_root_qemu: the checks every script that boots a guest makes.
io_need_root_qemu() {
	[ "$(id -u)" -eq 0 ] || io_skip "needs root (network namespace, tap)"
	command -v qemu-system-x86_64 >/dev/null 2>&1 ||
		io_skip "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
	ip netns list >/dev/null 2>&1 || io_skip "ip netns not usable"
}

# ---- the private network: namespace IO_NS, bridge IO_BR at 10.77.0.1/24
# (softrnic's side), tap IO_TAP for the guest at 10.77.0.2.  The addresses
# exist only inside the namespace; nothing is added to the host's.
IO_NS=srn-interop-$$
IO_BR=siobr0
IO_TAP=siotap0
IO_HOST_IP=10.77.0.1
IO_GUEST_IP=10.77.0.2
IO_HDEV=srn_io$$          # softrnic's device on the bridge (registry files named after it)
IO_QEMU_PID=""
IO_LOGS=${IO_LOGS:-$IO_DIR/logs}
io_ns() { ip netns exec "$IO_NS" "$@"; }

io_net_up() {
	ip netns add "$IO_NS" || io_skip "cannot create a network namespace"
	trap io_cleanup EXIT
	trap 'exit 130' INT TERM
	io_ns ip link set lo up
	io_ns ip link add "$IO_BR" type bridge stp_state 0 forward_delay 0
	io_ns ip tuntap add dev "$IO_TAP" mode tap
	io_ns ip link set "$IO_TAP" master "$IO_BR"
	io_ns ip addr add "$IO_HOST_IP/24" dev "$IO_BR"
	io_ns ip link set "$IO_TAP" up
	io_ns ip link set "$IO_BR" up
}

# io_mtu MTU: the host side of the link (tap and bridge) at MTU
io_mtu() {
	io_ns ip link set "$IO_TAP" mtu "$1"
	io_ns ip link set "$IO_BR" mtu "$1"
}

io_cleanup() {
	local p
	# a softrnic server still waiting for its client: its timeout and all
	[ -n "${IO_HOST_PID:-}" ] && pkill -P "$IO_HOST_PID" 2>/dev/null
	for p in $IO_QEMU_PID; do kill "$p" 2>/dev/null; done
	for p in $IO_QEMU_PID; do wait "$p" 2>/dev/null; done
	ip netns del "$IO_NS" 2>/dev/null
	rm -f /dev/shm/softrnic-"$IO_HDEV"-*
}

# io_boot MTU [EXTRA_KERNEL_ARGS]: boots the guest (TCG, 2 vCPUs) on the
# tap, its console in $IO_LOGS/guest.log, and waits for IO-READY (up to
# IO_BOOT_SECS, default 240).  Sets IO_GID (rxe0's IPv4-mapped GID index).
io_boot() {
	local mtu=$1 extra=${2:-} t0=$SECONDS i
	[ -e "$IO_OUT/initramfs.cpio.gz" ] || { echo "no guest: run build-guest.sh" >&2; return 1; }
	io_mtu "$mtu"
	ip netns exec "$IO_NS" timeout -k 5 "${IO_GUEST_SECS:-3600}" qemu-system-x86_64 \
		-nographic -no-reboot -machine pc,accel=tcg -cpu max -smp 2 -m 1G \
		-kernel "$IO_OUT/vmlinuz" -initrd "$IO_OUT/initramfs.cpio.gz" \
		-append "console=ttyS0 loglevel=3 panic=-1 mitigations=off io_ip=$IO_GUEST_IP/24 io_mtu=$mtu $extra" \
		-netdev tap,id=n0,ifname="$IO_TAP",script=no,downscript=no,vnet_hdr=off \
		-device virtio-net-pci,netdev=n0,mac=52:54:00:77:00:02,romfile=,csum=off,gso=off,guest_csum=off,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off \
		</dev/null >"$IO_LOGS/guest.log" 2>&1 &
	IO_QEMU_PID=$!
	for ((i = 0; i < ${IO_BOOT_SECS:-240} * 2; i++)); do
		grep -q IO-READY "$IO_LOGS/guest.log" && break
		kill -0 "$IO_QEMU_PID" 2>/dev/null || break
		sleep 0.5
	done
	if ! grep -q IO-READY "$IO_LOGS/guest.log"; then
		echo "guest did not come up:"; tail -n 20 "$IO_LOGS/guest.log" | sed 's/^/    | /'
		return 1
	fi
	IO_GID=$(sed -n 's/.*IO-READY.* gid=\([0-9]*\).*/\1/p' "$IO_LOGS/guest.log")
	io_log "guest up in $((SECONDS - t0)) s: $(grep -o 'IO-READY.*' "$IO_LOGS/guest.log")"
}

# io_poweroff: asks the guest to power off, then makes sure qemu is gone
io_poweroff() {
	[ -n "$IO_QEMU_PID" ] || return 0
	io_guest 10 'poweroff -f' >/dev/null 2>&1
	timeout 20 tail --pid="$IO_QEMU_PID" -f /dev/null
	kill "$IO_QEMU_PID" 2>/dev/null
	wait "$IO_QEMU_PID" 2>/dev/null
	IO_QEMU_PID=""
}

# io_guest SECS CMD: runs CMD in the guest (sh, through io-agent on TCP
# 7000), prints its output, returns its exit status (124: no answer in
# SECS).  CMD sees IO_DEV (rxe0), IO_GID and IO_IP.
io_guest() {
	local secs=$1 cmd=$2 out rc
	out=$(io_ns timeout -k 2 "$secs" bash -c \
		'exec 3<>/dev/tcp/'"$IO_GUEST_IP"'/7000 || exit 1; printf "%s\n" "$1" >&3; cat <&3' _ "$cmd")
	rc=$?
	printf '%s\n' "$out" | grep -v '^IO-RC='
	[ $rc -eq 0 ] || return $rc
	rc=$(printf '%s\n' "$out" | sed -n 's/^IO-RC=//p' | tail -n1)
	return "${rc:-125}"
}

# io_host SECS CMD...: CMD through softrnic in the namespace on the bridge
# (device $IO_HDEV, GID index 0 = ::ffff:10.77.0.1; with IO_IWARP=1 the
# bridge's iWARP device of that name instead), counters at exit on stderr
# (SOFTRNIC_LOG=debug).  Extra variables: IO_HOST_ENV.
io_host() {
	local secs=$1 kind=""
	shift
	[ "${IO_IWARP:-0}" = 1 ] && kind=:iwarp
	io_ns env SOFTRNIC_DEVICES="$IO_BR$kind=$IO_HDEV" SOFTRNIC_LOG=debug ${IO_HOST_ENV:-} \
		timeout -k 2 "$secs" "$SOFTRNIC" run -- "$@"
}

# io_counter NAME FILE: a softrnic counter summed over a debug log's dumps
io_counter() { awk -v n="$1" '$2 == n { s += $3 } END { print s + 0 }' "$2"; }
