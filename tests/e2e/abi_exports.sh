#!/usr/bin/env bash
# The drop-in libraries export exactly rdma-core v44's symbol@version set
# (abi/*.exports.txt: nothing missing, nothing extra, every symbol the
# default version "@@"), and carry rdma-core's sonames.
. "$(dirname "$0")/../lib/e2e.sh"
t_need nm readelf

# "VERSION NAME" lines, sorted, for the defined dynamic symbols of $1.
# A version-node symbol (nm type A) is listed as "NODE NODE", as in the
# .exports.txt files; binutils prints it with or without "@@NODE".
exports_of() {
	nm -D --defined-only --with-symbol-versions "$1" | awk '
		{ sym = $NF }
		sym ~ /@@/ { split(sym, p, "@@"); print p[2], p[1]; next }
		sym ~ /@/  { split(sym, p, "@");  print "NONDEFAULT:" p[2], p[1]; next }
		$2 == "A"  { print sym, sym; next }
		{ print "UNVERSIONED", sym }' | sort -u
}

check_lib() { # file, soname
	local lib=$1 soname=$2 want got
	want="$T_TMP/$soname.want"; got="$T_TMP/$soname.got"
	if [ ! -e "$SRN_BUILD/lib/$lib" ]; then
		t_fail "$lib not built in $SRN_BUILD/lib"; return
	fi
	sort -u "$SRN_SOURCE/abi/$soname.exports.txt" >"$want"
	exports_of "$SRN_BUILD/lib/$lib" >"$got"
	local missing extra
	missing=$(comm -23 "$want" "$got")
	extra=$(comm -13 "$want" "$got")
	if [ -z "$missing" ] && [ -z "$extra" ]; then
		t_pass "$soname exports exactly the $(wc -l <"$want") symbol@version entries of abi/$soname.exports.txt"
	else
		t_fail "$soname export set differs from abi/$soname.exports.txt"
		[ -n "$missing" ] && echo "$missing" | sed 's/^/    missing: /' | head -40
		[ -n "$extra" ] && echo "$extra" | sed 's/^/    extra:   /' | head -40
	fi
	local so
	so=$(readelf -d "$SRN_BUILD/lib/$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	if [ "$so" = "$soname" ]; then
		t_pass "$lib has SONAME $so"
	else
		t_fail "$lib SONAME is '$so', want $soname"
	fi
}

check_lib libibverbs.so.1 libibverbs.so.1
check_lib librdmacm.so.1 librdmacm.so.1

# The reference lists themselves must match Debian's rdma-core v44 when it
# is installed (default versions only: rdma-core also carries old
# non-default IBVERBS_1.0 compat aliases, which no Debian program binds).
for soname in libibverbs.so.1 librdmacm.so.1; do
	sys=/usr/lib/x86_64-linux-gnu/$soname
	[ -e "$sys" ] || { echo "skip - $sys not installed"; continue; }
	exports_of "$sys" | grep -v '^NONDEFAULT:' >"$T_TMP/$soname.sys"
	if cmp -s "$T_TMP/$soname.sys" <(sort -u "$SRN_SOURCE/abi/$soname.exports.txt"); then
		nondef=$(exports_of "$sys" | grep -c '^NONDEFAULT:')
		t_pass "abi/$soname.exports.txt equals the system $soname's default-version set ($nondef compat aliases not exported)"
	else
		t_fail "abi/$soname.exports.txt differs from the system $soname"
		diff <(sort -u "$SRN_SOURCE/abi/$soname.exports.txt") "$T_TMP/$soname.sys" | head -20
	fi
done

# Each symbol has the same kind (function or data object) as rdma-core's:
# a program or provider that binds a function to a data symbol, or the
# reverse, breaks at run time (copy relocations, PLT calls).
kinds_of() { # file -> "name@@ver TYPE" for defined FUNC/OBJECT symbols
	readelf -W --dyn-syms "$1" | awk '$7 != "UND" && ($4 == "FUNC" || $4 == "OBJECT") &&
		$8 ~ /@@/ { print $8, $4 }' | sort -u
}
for soname in libibverbs.so.1 librdmacm.so.1; do
	sys=/usr/lib/x86_64-linux-gnu/$soname
	[ -e "$sys" ] && [ -e "$SRN_BUILD/lib/$soname" ] || continue
	# Version-node symbols (ABS OBJECT) are the same on both sides.
	join -j1 <(kinds_of "$SRN_BUILD/lib/$soname") <(kinds_of "$sys") >"$T_TMP/$soname.kinds"
	diffs=$(awk '$2 != $3' "$T_TMP/$soname.kinds")
	n=$(wc -l <"$T_TMP/$soname.kinds")
	if [ -z "$diffs" ] && [ "$n" -gt 0 ]; then
		t_pass "$soname: all $n symbols are the same kind (FUNC/OBJECT) as in rdma-core"
	else
		t_fail "$soname: symbol kinds differ from rdma-core"
		echo "$diffs" | sed 's/^/    /' | head -20
	fi
done

# librdmacm must take its verbs from libibverbs.so.1 (ours, by soname).
needed=$(readelf -d "$SRN_BUILD/lib/librdmacm.so.1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
if echo " $needed" | grep -q ' libibverbs.so.1 '; then
	t_pass "librdmacm.so.1 NEEDs libibverbs.so.1 ($needed)"
else
	t_fail "librdmacm.so.1 does not NEED libibverbs.so.1 ($needed)"
fi

t_done
