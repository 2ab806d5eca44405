#!/usr/bin/env bash
# The iWARP device (SOFTRNIC_DEVICES=lo:iwarp) as Debian's unmodified
# ibv_devices and ibv_devinfo and `softrnic info -v` show it: srn_iw_lo,
# transport iWARP, no atomics, Ethernet, one GID holding a MAC; and the
# sysfs view's node_type "4: RNIC", as siw's.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_devinfo ibv_devices

out="$T_TMP/out"
check() { # label, extended regex, file
	if grep -Eq "$2" "$3"; then t_pass "$1"; else t_fail "$1"; sed 's/^/    | /' "$3" | head -40; fi
}
SOFTRNIC_DEVICES=lo:iwarp timeout -k 2 20 "$SOFTRNIC" run -- ibv_devices >"$out" 2>&1
check "ibv_devices lists srn_iw_lo" '^ +srn_iw_lo[[:space:]]+[0-9a-f]{16}$' "$out"

if SOFTRNIC_DEVICES=lo:iwarp timeout -k 2 20 "$SOFTRNIC" run -- ibv_devinfo -v -d srn_iw_lo \
	>"$out" 2>&1; then
	t_pass "ibv_devinfo -v -d srn_iw_lo exits 0"
else
	t_fail "ibv_devinfo -v -d srn_iw_lo exits 0"; tail -20 "$out"
fi
check "devinfo: transport iWARP (1)" 'transport:[[:space:]]+iWARP \(1\)' "$out"
check "devinfo: atomic_cap ATOMIC_NONE" 'atomic_cap:[[:space:]]+ATOMIC_NONE \(0\)' "$out"
check "devinfo: link_layer Ethernet" 'link_layer:[[:space:]]+Ethernet' "$out"
check "devinfo: gid_tbl_len 1" 'gid_tbl_len:[[:space:]]+1$' "$out"
check "devinfo: max_msg_sz 0xffffffff" 'max_msg_sz:[[:space:]]+0xffffffff' "$out"
check "devinfo: PORT_ACTIVE" 'state:[[:space:]]+PORT_ACTIVE \(4\)' "$out"
if grep -q "Failed" "$out"; then t_fail "devinfo: no 'Failed' lines"; else t_pass "devinfo: no 'Failed' lines"; fi

SOFTRNIC_DEVICES=lo:iwarp timeout -k 2 20 "$SOFTRNIC" info -v >"$out" 2>&1
check "info: srn_iw_lo" '^srn_iw_lo$' "$out"
check "info: transport iWARP" 'transport:[[:space:]]+iWARP ' "$out"
# a locally administered MAC in the first 6 bytes, zeros after
check "info: GID[0] is a MAC then zeros" \
	'GID\[0\]:[[:space:]]+[0-9a-f]{0,2}[2367abef][0-9a-f]{0,2}:[0-9a-f]{1,4}:[0-9a-f]{1,4}::, iWARP' "$out"

SOFTRNIC_DEVICES=lo:iwarp timeout -k 2 20 "$SOFTRNIC" run -- \
	cat /sys/class/infiniband/srn_iw_lo/node_type >"$out" 2>&1
check "sysfs view: node_type 4: RNIC" '^4: RNIC$' "$out"
t_done
