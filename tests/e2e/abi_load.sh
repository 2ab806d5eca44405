#!/usr/bin/env bash
# Every Debian program and library listed in abi/imports/ loads against
# the drop-in libraries with all symbols bound up front (LD_BIND_NOW):
# no "symbol lookup error", "undefined symbol" or "version `...' not
# found", and libibverbs.so.1 (and librdmacm.so.1) really come from
# $SRN_BUILD/lib.  Programs run with --help (stdin closed, 5 s bound);
# libraries are dlopen()ed RTLD_NOW by a small helper.  Missing programs
# and libraries are reported and skipped.
. "$(dirname "$0")/../lib/e2e.sh"

LIB="$SRN_BUILD/lib"
[ -e "$LIB/libibverbs.so.1" ] || t_skip "libibverbs.so.1 not built in $LIB"
MULTIARCH=/usr/lib/x86_64-linux-gnu
BAD_RE="symbol lookup error|undefined symbol|version \`[^']*' not found|cannot open shared object"

# Which of our two libraries a loaded-object trace resolved, and from where.
# $1 = trace output, $2 = soname: prints "ok" or a reason.
check_resolved() {
	local line path
	line=$(grep -E "^[[:space:]]*$2 => " "$1" | head -1)
	[ -z "$line" ] && { echo "not loaded"; return; }
	path=$(echo "$line" | sed -E 's/.*=> ([^ ]+).*/\1/')
	case "$(readlink -f "$path")" in
	"$(readlink -f "$LIB")"/*) echo ok ;;
	*) echo "resolved to $path" ;;
	esac
}

# ldd -r equivalent: trace the objects and check every relocation.
trace() { # file, out
	timeout 5 env LD_TRACE_LOADED_OBJECTS=1 LD_WARN=1 LD_BIND_NOW=1 \
		LD_LIBRARY_PATH="$LIB" "$1" >"$2" 2>&1 </dev/null
}

check_program() { # name
	local name=$1 prog out=$T_TMP/$1.run tr=$T_TMP/$1.trace why="" r
	prog=$(command -v "$name") || { echo "skip - $name: not installed"; return; }
	trace "$prog" "$tr"
	timeout -k 1 5 env LD_BIND_NOW=1 $T_SAN_ENV LD_LIBRARY_PATH="$LIB" "$prog" --help \
		>"$out" 2>&1 </dev/null
	if grep -qE "$BAD_RE" "$out" "$tr"; then
		why="$(grep -hE "$BAD_RE" "$out" "$tr" | head -3 | tr '\n' ' ')"
	fi
	r=$(check_resolved "$tr" libibverbs.so.1)
	[ "$r" = ok ] || why="$why libibverbs.so.1 $r"
	if grep -q '^RDMACM' "$SRN_SOURCE/abi/imports/$name.txt"; then
		r=$(check_resolved "$tr" librdmacm.so.1)
		[ "$r" = ok ] || why="$why librdmacm.so.1 $r"
	fi
	if [ -z "$why" ]; then
		t_pass "$name loads with LD_BIND_NOW ($(grep -c . "$SRN_SOURCE/abi/imports/$name.txt") imports bound)"
	else
		t_fail "$name: $why"
		sed 's/^/    | /' "$out" | head -5
	fi
}

# The dlopen helper: loads $1 with RTLD_NOW and prints where
# libibverbs.so.1 came from.
DLHELP=$T_TMP/dlopen_now
cat >"$T_TMP/dlopen_now.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	struct link_map *lm = NULL;
	void *h, *v;

	if (argc != 2)
		return 2;
	h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (v && dlinfo(v, RTLD_DI_LINKMAP, &lm) == 0)
		printf("\tlibibverbs.so.1 => %s\n", lm->l_name);
	return 0;
}
C
HAVE_DLHELP=0
if ${CC:-cc} -o "$DLHELP" "$T_TMP/dlopen_now.c" -ldl 2>"$T_TMP/cc.err"; then
	HAVE_DLHELP=1
else
	echo "note: no C compiler for the dlopen helper; libraries use LD_PRELOAD"
fi

check_library() { # soname
	local name=$1 path out=$T_TMP/$1.run tr=$T_TMP/$1.trace why="" r
	path=$(find "$MULTIARCH" -maxdepth 2 -name "$name" 2>/dev/null | head -1)
	[ -n "$path" ] || { echo "skip - $name: not installed"; return; }
	if [ $HAVE_DLHELP = 1 ]; then
		timeout -k 1 5 env LD_BIND_NOW=1 $T_SAN_ENV LD_LIBRARY_PATH="$LIB" \
			"$DLHELP" "$path" >"$out" 2>&1 </dev/null
		[ $? -eq 0 ] || why="dlopen failed"
		cp "$out" "$tr"
	else
		timeout -k 1 5 env LD_BIND_NOW=1 $T_SAN_ENV LD_LIBRARY_PATH="$LIB" \
			LD_PRELOAD="${T_SAN_RT:+$T_SAN_RT:}$path" /bin/true >"$out" 2>&1 </dev/null
		timeout 5 env LD_TRACE_LOADED_OBJECTS=1 LD_LIBRARY_PATH="$LIB" \
			LD_PRELOAD="$path" /bin/true >"$tr" 2>&1 </dev/null
	fi
	if grep -qE "$BAD_RE|ERROR: ld.so" "$out"; then
		why="$why $(grep -hE "$BAD_RE|ERROR: ld.so" "$out" | head -3 | tr '\n' ' ')"
	fi
	r=$(check_resolved "$tr" libibverbs.so.1)
	[ "$r" = ok ] || why="$why libibverbs.so.1 $r"
	if [ -z "$why" ]; then
		t_pass "$name loads RTLD_NOW ($(grep -c . "$SRN_SOURCE/abi/imports/$name.txt") imports bound)"
	else
		t_fail "$name:$why"
		sed 's/^/    | /' "$out" | head -5
	fi
}

n=0
for f in "$SRN_SOURCE"/abi/imports/*.txt; do
	name=$(basename "$f" .txt)
	case "$name" in
	*.so.*) check_library "$name" ;;
	*) check_program "$name" ;;
	esac
	n=$((n + 1))
done
[ $((T_PASSES + T_FAILS)) -gt 0 ] || t_skip "none of the $n programs/libraries is installed"
t_done
