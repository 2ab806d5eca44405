#!/usr/bin/env bash
# make install's layout works from wherever it lands: the build is installed
# into a staging DESTDIR, and from there the installed CLI lists devices and
# runs Debian's ibv_rc_pingpong, a program built with the installed
# pkg-config file runs on softrnic with no environment, and nothing was
# installed next to the system's libibverbs.
. "$(dirname "$0")/../lib/e2e.sh"
t_need cmake cc pkg-config ibv_rc_pingpong

stage="$T_TMP/stage"
prefix=/opt/srn-test
manifest="$SRN_BUILD/install_manifest.txt"
[ -f "$manifest" ] && cp "$manifest" "$T_TMP/manifest.saved"
if DESTDIR="$stage" timeout 60 cmake --install "$SRN_BUILD" --prefix "$prefix" >"$T_TMP/install.log" 2>&1; then
	t_pass "cmake --install into a DESTDIR"
else
	t_fail "cmake --install into a DESTDIR"; sed 's/^/  | /' "$T_TMP/install.log"
fi
# The staged install must not leave the build's own manifest changed.
if [ -f "$T_TMP/manifest.saved" ]; then mv "$T_TMP/manifest.saved" "$manifest"; else rm -f "$manifest"; fi

root="$stage$prefix"
cli="$root/bin/softrnic"
libdir=$(dirname "$(find "$root" -name libibverbs.so.1 | head -1)")
case "$libdir" in
*/softrnic) t_pass "libraries in a private directory: ${libdir#$stage}" ;;
*) t_fail "libraries in a private directory (found: ${libdir:-none})" ;;
esac
[ -f "$root/share/man/man1/softrnic.1" ] && t_pass "man page installed" || t_fail "man page installed"
[ -f "$root/share/man/man7/softrnic.7" ] && t_pass "softrnic.7 installed" || t_fail "softrnic.7 installed"
[ -f "$libdir/libsoftrnic_sysfs_map.so" ] && t_pass "the sysfs view's preload library installed beside them" ||
	t_fail "the sysfs view's preload library installed beside them"
preload=$(timeout 20 "$cli" run -- sh -c 'echo "$LD_PRELOAD"')
case "$preload" in
*"$(realpath "$libdir")/libsoftrnic_sysfs_map.so"*) t_pass "installed softrnic run preloads the installed sysfs map" ;;
*) t_fail "installed softrnic run: LD_PRELOAD=$preload" ;;
esac

if out=$(timeout 20 "$cli" devices 2>&1) && echo "$out" | grep -q '^srn_lo'; then
	t_pass "installed softrnic devices lists srn_lo"
else
	t_fail "installed softrnic devices: $out"
fi
libpath=$(timeout 20 "$cli" run -- sh -c 'echo "$LD_LIBRARY_PATH"')
case "$libpath" in
"$(realpath "$libdir")"*) t_pass "installed softrnic run puts its own libraries first" ;;
*) t_fail "installed softrnic run: LD_LIBRARY_PATH=$libpath" ;;
esac

port=$(t_port)
SOFTRNIC="$cli"
if t_pair "inst$port" 60 "ibv_rc_pingpong -d srn_lo -g 0 -p $port -n 100" \
	"ibv_rc_pingpong -d srn_lo -g 0 -p $port -n 100 127.0.0.1"; then
	t_pass "ibv_rc_pingpong through the installed softrnic run"
else
	t_fail "ibv_rc_pingpong through the installed softrnic run"
fi

pc=$(find "$root" -name softrnic.pc | head -1)
cat >"$T_TMP/devs.c" <<'C'
#include <infiniband/verbs.h>
#include <stdio.h>
int main(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);

	for (int i = 0; i < n; i++)
		printf("%s\n", ibv_get_device_name(l[i]));
	if (l)
		ibv_free_device_list(l);
	return n > 0 ? 0 : 1;
}
C
if [ -n "$pc" ] &&
   cc -o "$T_TMP/devs" "$T_TMP/devs.c" $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs softrnic) 2>"$T_TMP/cc.log" &&
   out=$(env -u LD_LIBRARY_PATH timeout 20 "$T_TMP/devs" 2>&1) && echo "$out" | grep -q '^srn_lo'; then
	t_pass "a program built with the installed softrnic.pc runs on softrnic"
else
	t_fail "program built with softrnic.pc: $(cat "$T_TMP/cc.log" 2>/dev/null) ${out:-}"
fi
t_done
