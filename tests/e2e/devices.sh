#!/usr/bin/env bash
# Debian's unmodified ibv_devices and ibv_devinfo through `softrnic run`:
# srn_lo listed first and described as an active RoCE (Ethernet) port with
# MTU 4096 and GID[0] = ::ffff:127.0.0.1; every other interface that is up
# with an address has a device; SOFTRNIC_DEVICES selects and renames.
. "$(dirname "$0")/../lib/e2e.sh"
t_need ibv_devices

out="$T_TMP/devices"
if timeout -k 2 20 "$SOFTRNIC" run -- ibv_devices >"$out" 2>&1; then
	t_pass "ibv_devices exits 0"
else
	t_fail "ibv_devices exits 0"; sed 's/^/    | /' "$out"
fi
# Data lines follow the two header lines: "    NAME<tab>GUID".
first=$(awk 'NR > 2 && NF >= 2 { print $1; exit }' "$out")
[ "$first" = srn_lo ] && t_pass "srn_lo listed first" || t_fail "srn_lo listed first (got '$first')"
grep -Eq '^ +srn_lo[[:space:]]+[0-9a-f]{16}$' "$out" &&
	t_pass "srn_lo has a 16-digit node GUID" || t_fail "srn_lo has a 16-digit node GUID"

# Every interface that is up and has an IPv4/IPv6 address has a device.
for ifc in $(ip -o addr show up 2>/dev/null | awk '{ sub(/:.*/, "", $2); sub(/@.*/, "", $2); print $2 }' | sort -u); do
	if grep -Eq "^ +srn_$ifc[[:space:]]" "$out"; then
		t_pass "interface $ifc has device srn_$ifc"
	else
		t_fail "interface $ifc has device srn_$ifc"
	fi
done

if command -v ibv_devinfo >/dev/null 2>&1; then
	info="$T_TMP/devinfo"
	if timeout -k 2 20 "$SOFTRNIC" run -- ibv_devinfo -v -d srn_lo >"$info" 2>&1; then
		t_pass "ibv_devinfo -v -d srn_lo exits 0"
	else
		t_fail "ibv_devinfo -v -d srn_lo exits 0"; sed 's/^/    | /' "$info" | tail -20
	fi
	check() { # label, extended regex
		if grep -Eq "$2" "$info"; then t_pass "devinfo: $1"; else t_fail "devinfo: $1"; fi
	}
	check "hca_id srn_lo" '^hca_id:[[:space:]]+srn_lo$'
	check "state PORT_ACTIVE" 'state:[[:space:]]+PORT_ACTIVE \(4\)'
	check "max_mtu 4096" 'max_mtu:[[:space:]]+4096 \(5\)'
	check "active_mtu 4096 on lo" 'active_mtu:[[:space:]]+4096 \(5\)'
	check "link_layer Ethernet" 'link_layer:[[:space:]]+Ethernet'
	check "GID[0] ::ffff:127.0.0.1, RoCE v2" 'GID\[  0\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2'
	check "atomic_cap ATOMIC_HCA" 'atomic_cap:[[:space:]]+ATOMIC_HCA \(1\)'
	check "phys_port_cnt 1" 'phys_port_cnt:[[:space:]]+1$'
	check "phys_state LINK_UP" 'phys_state:[[:space:]]+LINK_UP \(5\)'
	check "fw_ver softrnic" 'fw_ver:[[:space:]]+softrnic '
	if grep -q "Failed" "$info"; then t_fail "devinfo: no 'Failed' lines"; else t_pass "devinfo: no 'Failed' lines"; fi

	all="$T_TMP/devinfo-all"
	timeout -k 2 20 "$SOFTRNIC" run -- ibv_devinfo >"$all" 2>&1
	n_dev=$(awk 'NR > 2 && NF >= 2' "$out" | wc -l)
	n_hca=$(grep -c '^hca_id:' "$all")
	[ "$n_dev" -eq "$n_hca" ] && t_pass "ibv_devinfo shows all $n_hca devices" ||
		t_fail "ibv_devinfo shows all devices ($n_hca of $n_dev)"
else
	echo "SKIP: ibv_devinfo not installed (devinfo checks)"
fi

# ibv_asyncwatch opens the device and blocks on async_fd: still waiting
# (killed by timeout, 124) with no events, after printing its banner.
if command -v ibv_asyncwatch >/dev/null 2>&1; then
	aw="$T_TMP/asyncwatch"
	timeout 1 "$SOFTRNIC" run -- ibv_asyncwatch -d srn_lo >"$aw" 2>&1
	st=$?
	if [ $st -eq 124 ] && grep -q "srn_lo: async event FD" "$aw"; then
		t_pass "ibv_asyncwatch blocks waiting for events"
	else
		t_fail "ibv_asyncwatch blocks waiting for events (exit $st)"; sed 's/^/    | /' "$aw"
	fi
fi

ren="$T_TMP/renamed"
SOFTRNIC_DEVICES=lo=myrnic timeout -k 2 20 "$SOFTRNIC" run -- ibv_devices >"$ren" 2>&1
if grep -Eq '^ +myrnic[[:space:]]' "$ren" && ! grep -q srn_ "$ren"; then
	t_pass "SOFTRNIC_DEVICES=lo=myrnic renames and selects"
else
	t_fail "SOFTRNIC_DEVICES=lo=myrnic renames and selects"; sed 's/^/    | /' "$ren"
fi
bad="$T_TMP/unknown"
timeout -k 2 20 "$SOFTRNIC" run --devices nosuchif0,lo -- ibv_devices >"$bad" 2>&1
if grep -q "nosuchif0" "$bad" && grep -Eq '^ +srn_lo[[:space:]]' "$bad"; then
	t_pass "unknown interface in SOFTRNIC_DEVICES: warning, others kept"
else
	t_fail "unknown interface in SOFTRNIC_DEVICES: warning, others kept"; sed 's/^/    | /' "$bad"
fi
t_done
