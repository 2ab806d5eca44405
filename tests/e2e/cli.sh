#!/usr/bin/env bash
# The softrnic CLI: every subcommand, --help, error messages and exit
# statuses, `run`'s library path and exit-status passthrough.
. "$(dirname "$0")/../lib/e2e.sh"

o="$T_TMP/out"; e="$T_TMP/err"
# expect LABEL STATUS CMD...: CMD exits with STATUS; output in $o / $e.
expect() {
	local label=$1 want=$2 got; shift 2
	timeout -k 2 20 "$@" >"$o" 2>"$e"; got=$?
	if [ "$got" -eq "$want" ]; then
		t_pass "$label (exit $got)"
	else
		t_fail "$label (exit $got, want $want)"
		sed 's/^/    out| /' "$o" | tail -5; sed 's/^/    err| /' "$e" | tail -5
	fi
}
has() { # label, file, regex
	if grep -Eq "$3" "$2"; then t_pass "$1"; else t_fail "$1"; sed 's/^/    | /' "$2" | tail -5; fi
}

expect "no arguments: usage" 2 "$SOFTRNIC"
has "no arguments: usage on stderr" "$e" '^usage: softrnic'
expect "unknown command" 2 "$SOFTRNIC" frobnicate
has "unknown command named" "$e" "^softrnic: unknown command 'frobnicate'"
has "unknown command: usage" "$e" '^usage: softrnic'
expect "help" 0 "$SOFTRNIC" help
for c in devices info qps stats run version help; do
	has "help lists $c" "$o" "^  $c "
done
expect "--help" 0 "$SOFTRNIC" --help
has "--help prints usage" "$o" '^usage: softrnic'
for c in devices info qps stats run version help; do
	expect "$c --help" 0 "$SOFTRNIC" "$c" --help
	has "$c --help shows its usage" "$o" "^usage: softrnic $c"
	expect "help $c" 0 "$SOFTRNIC" help "$c"
done

expect "version" 0 "$SOFTRNIC" version
has "version string" "$o" '^softrnic [0-9]+\.[0-9]+\.[0-9]+'

expect "devices" 0 "$SOFTRNIC" devices
has "devices: header" "$o" '^device +node GUID +interface'
has "devices: srn_lo first" <(sed -n 2p "$o") '^srn_lo +[0-9a-f]{4}(:[0-9a-f]{4}){3} +lo$'
expect "devices with an argument" 2 "$SOFTRNIC" devices extra

expect "info" 0 "$SOFTRNIC" info
has "info: srn_lo" "$o" '^srn_lo$'
has "info: GID[0]" "$o" 'GID\[0\]:.*::ffff:127\.0\.0\.1, RoCE v2'
expect "info -d srn_lo -v" 0 "$SOFTRNIC" info -d srn_lo -v
has "info -v: limits" "$o" 'max_qp:'
has "info -v: active_mtu 4096" "$o" 'active_mtu:.*4096'
expect "info -d unknown" 1 "$SOFTRNIC" info -d nosuchdev
has "info -d unknown: message" "$e" "^softrnic: no device 'nosuchdev' \(see softrnic devices\)$"
expect "info with a bad option" 2 "$SOFTRNIC" info --bogus
expect "info --devices via env" 0 env SOFTRNIC_DEVICES=lo=myrnic "$SOFTRNIC" info -d myrnic

expect "run: exit status passthrough" 3 "$SOFTRNIC" run -- sh -c 'exit 3'
expect "run: success" 0 "$SOFTRNIC" run -- true
expect "run: command not found" 127 "$SOFTRNIC" run -- nosuch-command-xyz
has "run: not-found message" "$e" '^softrnic: nosuch-command-xyz: command not found$'
expect "run: no command" 2 "$SOFTRNIC" run
expect "run: no command after --" 2 "$SOFTRNIC" run --
expect "run: LD_LIBRARY_PATH prepended" 0 env LD_LIBRARY_PATH=/keep/me "$SOFTRNIC" run -- sh -c 'echo "$LD_LIBRARY_PATH"'
has "run: our lib dir first, old path kept" "$o" '^/.*/lib:/keep/me$'
libdir=$(cut -d: -f1 "$o")
[ -e "$libdir/libibverbs.so.1" ] && t_pass "run: lib dir holds libibverbs.so.1" ||
	t_fail "run: lib dir holds libibverbs.so.1 ($libdir)"
expect "run: options set SOFTRNIC_*" 0 "$SOFTRNIC" run --devices lo --log debug -- sh -c 'echo "$SOFTRNIC_DEVICES $SOFTRNIC_LOG"'
has "run: --devices/--log exported" "$o" '^lo debug$'
expect "run: --pcap without a FILE" 2 "$SOFTRNIC" run --pcap -- true
has "run: --pcap names what is wrong" "$e" "needs a FILE, not '--'"
[ ! -e -- ] && t_pass "run: no file named -- written" || { rm -f -- --; t_fail "run: no file named -- written"; }
if command -v ibv_devinfo >/dev/null 2>&1; then
	expect "run: a capture path that cannot be opened still runs" 0 \
		"$SOFTRNIC" run --pcap /nonexistent-dir/x.pcap -- ibv_devinfo -d srn_lo
	has "run: the bad capture path is reported" "$e" 'SOFTRNIC_PCAP=/nonexistent-dir/x.pcap: No such file or directory; not capturing'
fi
# Settings: one place checks every SOFTRNIC_* variable.
expect "settings: a clean environment is valid" 0 env -u SOFTRNIC_TRANSPORT "$SOFTRNIC" settings
has "settings: lists SOFTRNIC_TRANSPORT with its default" "$o" '^  default: auto$'
expect "settings: bad values are refused" 1 env SOFTRNIC_LOG=foo SOFTRNIC_DIRECT=maybe \
	SOFTRNIC_SHM_MR_MAX_MB=abc SOFTRNIC_ENGINE_SPIN_US=-5 "$SOFTRNIC" settings
for v in "SOFTRNIC_LOG=foo.*one of: error, warn, info, debug, trace" "SOFTRNIC_DIRECT=maybe.*0 or 1" \
	"SOFTRNIC_SHM_MR_MAX_MB=abc.*integer from 0" "SOFTRNIC_ENGINE_SPIN_US=-5.*integer from 0 to 1000000"; do
	has "settings: names ${v%%=*} and what it takes" "$e" "$v"
done
if command -v ibv_devinfo >/dev/null 2>&1; then
	expect "a bad SOFTRNIC_LOG does not stop a program" 0 env SOFTRNIC_LOG=foo "$SOFTRNIC" run -- ibv_devinfo -d srn_lo
	n=$(grep -c 'SOFTRNIC_LOG=foo is not valid' "$e")
	[ "$n" -eq 1 ] && t_pass "a bad SOFTRNIC_LOG is reported once ($n)" || t_fail "a bad SOFTRNIC_LOG is reported once ($n)"
fi
expect "run: --transport udp" 0 "$SOFTRNIC" run --transport udp -- sh -c 'echo "$SOFTRNIC_TRANSPORT"'
has "run: --transport sets SOFTRNIC_TRANSPORT" "$o" '^udp$'
expect "run: --transport with a bad value" 2 "$SOFTRNIC" run --transport tcp -- true
has "run: --transport names the bad value" "$e" "run: --transport 'tcp' is not valid"
expect "run: --log with a bad value" 2 "$SOFTRNIC" run --log loud -- true
expect "run: SOFTRNIC_* passes through" 0 env SOFTRNIC_FOO=bar "$SOFTRNIC" run -- sh -c 'echo "$SOFTRNIC_FOO"'
has "run: SOFTRNIC_FOO kept" "$o" '^bar$'
expect "run: CMD's own options untouched" 0 "$SOFTRNIC" run sh -c 'echo "$0" -x' arg0
has "run: argv passed as is" "$o" '^arg0 -x$'
if command -v ibv_devices >/dev/null 2>&1; then
	expect "run: ibv_devices uses softrnic" 0 "$SOFTRNIC" run -- ibv_devices
	has "run: ibv_devices lists srn_lo" "$o" 'srn_lo'
fi
t_done
