#!/usr/bin/env bash
# The sysfs/devfs view (docs/sysfs-view.md): under `softrnic run`, python3
# reads srn_lo's files under their kernel names (/sys/class/infiniband,
# /sys/class/infiniband_verbs, /dev/infiniband) and finds the facts
# ibv_devinfo reports; the device node stats as a character device the user
# may read and write; a program without the preload still works and sees
# the real paths untouched; a network namespace has its own view (root).
. "$(dirname "$0")/../lib/e2e.sh"
t_need python3 ibv_devinfo

py="$T_TMP/view.py"
cat >"$py" <<'EOF'
import os, stat, sys
ib = '/sys/class/infiniband'
fails = 0
def check(ok, what):
    global fails
    print(('ok   - ' if ok else 'FAIL - ') + what)
    fails += 0 if ok else 1
def read(p):
    with open(p) as f:
        return f.read().strip()
devs = os.listdir(ib)
check('srn_lo' in devs, 'listdir %s has srn_lo: %s' % (ib, devs))
net = os.listdir(ib + '/srn_lo/device/net/')
check(net == ['lo'], 'srn_lo/device/net lists lo: %s' % net)
port = ib + '/srn_lo/ports/1/'
check(read(port + 'state') == '4: ACTIVE', 'port state 4: ACTIVE')
check(read(port + 'phys_state') == '5: LinkUp', 'phys_state 5: LinkUp')
check(read(port + 'link_layer') == 'Ethernet', 'link_layer Ethernet')
check(read(port + 'gids/0') == '0000:0000:0000:0000:0000:ffff:7f00:0001',
      'gids/0 is ::ffff:127.0.0.1: ' + read(port + 'gids/0'))
check(read(port + 'gid_attrs/types/0') == 'RoCE v2', 'gid_attrs/types/0 RoCE v2')
check(read(port + 'gid_attrs/ndevs/0') == 'lo', 'gid_attrs/ndevs/0 lo')
# the IPv6 entry after it (docs/ipv6.md)
check(read(port + 'gids/1') == '0000:0000:0000:0000:0000:0000:0000:0001',
      'gids/1 is ::1: ' + read(port + 'gids/1'))
check(read(port + 'gid_attrs/types/1') == 'RoCE v2', 'gid_attrs/types/1 RoCE v2')
check(read(port + 'gid_attrs/ndevs/1') == 'lo', 'gid_attrs/ndevs/1 lo')
check(' Gb/sec (' in read(port + 'rate'), 'rate: ' + read(port + 'rate'))
check(read(ib + '/srn_lo/node_type') == '1: CA', 'node_type 1: CA')
check(read(ib + '/srn_lo/node_guid') == sys.argv[1],
      'node_guid %s is ibv_devinfo\'s %s' % (read(ib + '/srn_lo/node_guid'), sys.argv[1]))
check(read(ib + '/srn_lo/device/numa_node') == '-1', 'device/numa_node -1')
# The verbs node of srn_lo, through class/infiniband_verbs/*/ibdev.
uv = [u for u in os.listdir('/sys/class/infiniband_verbs')
      if os.path.isdir('/sys/class/infiniband_verbs/' + u)
      and read('/sys/class/infiniband_verbs/%s/ibdev' % u) == 'srn_lo']
check(len(uv) == 1 and uv[0].startswith('srn_uverbs'), 'infiniband_verbs entry of srn_lo: %s' % uv)
node = '/dev/infiniband/' + (uv[0] if uv else 'none')
st = os.stat(node) if os.path.exists(node) else None
check(st is not None and stat.S_ISCHR(st.st_mode), node + ' is a character device')
check(os.access(node, os.R_OK | os.W_OK), node + ' readable and writable')
check(node.split('/')[-1] in os.listdir('/dev/infiniband'), 'listdir /dev/infiniband has it')
check(not os.path.exists(ib + '/srn_nosuch'), 'a name the view lacks is not there')
check(os.path.realpath(ib + '/srn_lo/ports/1').endswith('/srn_lo/ports/1'), 'realpath of a port')
sys.exit(1 if fails else 0)
EOF

guid=$(timeout -k 2 20 "$SOFTRNIC" run -- ibv_devinfo -d srn_lo 2>/dev/null |
	awk '$1 == "node_guid:" { print $2 }')
[ -n "$guid" ] && t_pass "ibv_devinfo gives srn_lo's node_guid $guid" ||
	t_fail "ibv_devinfo gives srn_lo's node_guid"

if timeout -k 2 30 "$SOFTRNIC" run -- python3 "$py" "$guid" >"$T_TMP/py.out" 2>&1; then
	t_pass "python3 reads the view under softrnic run"
else
	t_fail "python3 reads the view under softrnic run"
fi
sed 's/^/    | /' "$T_TMP/py.out"

# A shell tool in a child process inherits the preload.
if timeout -k 2 20 "$SOFTRNIC" run -- sh -c 'cat /sys/class/infiniband/srn_lo/ports/1/gid_attrs/ndevs/0' \
	>"$T_TMP/cat.out" 2>&1 && [ "$(cat "$T_TMP/cat.out")" = lo ]; then
	t_pass "a child process (sh -c cat) reads the view"
else
	t_fail "a child process (sh -c cat) reads the view: $(cat "$T_TMP/cat.out")"
fi

# Without the preload: programs work, and the kernel paths are the real ones.
if env $T_SAN_ENV LD_LIBRARY_PATH="$SRN_BUILD/lib" timeout -k 2 20 ibv_devinfo -d srn_lo >"$T_TMP/np" 2>&1 &&
	grep -q 'state:.*PORT_ACTIVE' "$T_TMP/np"; then
	t_pass "ibv_devinfo without the preload"
else
	t_fail "ibv_devinfo without the preload"; sed 's/^/    | /' "$T_TMP/np"
fi
real=$(python3 -c 'import os; print(os.path.exists("/sys/class/infiniband/srn_lo"))')
np=$(LD_LIBRARY_PATH="$SRN_BUILD/lib" python3 -c 'import os; print(os.path.exists("/sys/class/infiniband/srn_lo"))')
[ "$np" = "$real" ] && [ "$np" = False ] &&
	t_pass "without the preload /sys/class/infiniband/srn_lo is not there" ||
	t_fail "without the preload /sys/class/infiniband/srn_lo is not there ($np)"
off=$(SOFTRNIC_SYSFS_VIEW=0 timeout -k 2 20 "$SOFTRNIC" run -- sh -c 'echo "${LD_PRELOAD:-none}"')
# a sanitizer build preloads its runtimes all the same
[ -n "$T_SAN_RT" ] && off=$(echo "$off" | tr ':' '\n' | grep -vE '/lib(a|ub|t)san\.so' | paste -sd:)
off=${off:-none}
[ "$off" = none ] && t_pass "SOFTRNIC_SYSFS_VIEW=0: no preload" ||
	t_fail "SOFTRNIC_SYSFS_VIEW=0: no preload ($off)"

# Another network namespace has its own devices and so its own view.
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns list >/dev/null 2>&1; then
	ns="srnview$$"
	if ip netns add "$ns"; then
		ip -n "$ns" link set lo up
		nsdevs=$(timeout -k 2 20 ip netns exec "$ns" "$SOFTRNIC" run -- \
			python3 -c 'import os; print(sorted(os.listdir("/sys/class/infiniband")))' 2>&1)
		nsino=$(ip netns exec "$ns" stat -L -c %i /proc/self/ns/net)
		ip netns del "$ns"
		rm -rf "/dev/shm/softrnic-sysfs-$(id -u)-$nsino"
		[ "$nsdevs" = "['srn_lo']" ] && t_pass "a new namespace's view has srn_lo only" ||
			t_fail "a new namespace's view has srn_lo only: $nsdevs"
	else
		echo "  (no network namespace: part skipped)"
	fi
fi

# Concurrent refreshes never show a reader part of a file: in a namespace
# of its own (so its own tree), two writers keep renaming lo's device
# (srn_a, srn_b), rewriting class/infiniband_verbs/srn_uverbs0/ibdev, while
# python3 reads that file; every read must be one whole name.
cat >"$T_TMP/race_read.py" <<'PY'
import sys, time
seen, bad, end = {}, 0, time.time() + 60
for i in range(200000):
    try:
        with open(sys.argv[1]) as f:
            v = f.read()
    except FileNotFoundError:
        v = 'missing'
    seen[v] = seen.get(v, 0) + 1
    bad += v not in ('srn_lo\n', 'srn_a\n', 'srn_b\n')
    if i % 1000 == 0 and time.time() > end:
        break
print('reads', {k.strip(): n for k, n in sorted(seen.items())}, 'bad', bad)
sys.exit(1 if bad or len(seen) < 2 else 0)
PY
race() {
	local root a b rc
	ip link set lo up
	root=/dev/shm/softrnic-sysfs-$(id -u)-$(stat -L -c %i /proc/self/ns/net)
	"$SOFTRNIC" devices >/dev/null
	# fewer refreshes in a sanitizer build (each start is slower)
	writer() { for _ in $(seq $((150 / T_SLOW))); do SOFTRNIC_DEVICES=lo=$1 "$SOFTRNIC" devices >/dev/null; done; }
	writer srn_a & a=$!
	writer srn_b & b=$!
	python3 "$T_TMP/race_read.py" "$root/class/infiniband_verbs/srn_uverbs0/ibdev"
	rc=$?
	wait "$a" "$b"
	rm -rf "$root"
	return $rc
}
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
	export SOFTRNIC T_TMP T_SLOW
	if timeout -k 2 120 unshare -n bash -c "$(declare -f race); race" >"$T_TMP/race.out" 2>&1; then
		t_pass "concurrent refreshes: every read a whole file ($(cat "$T_TMP/race.out"))"
	else
		t_fail "concurrent refreshes: every read a whole file"; sed 's/^/    | /' "$T_TMP/race.out"
	fi
else
	echo "  (unshare -n not possible: concurrency part skipped)"
fi
t_done
