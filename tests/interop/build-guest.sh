#!/usr/bin/env bash
# Builds the interop guest from Debian packages: $SRN_INTEROP_DIR/out/vmlinuz
# (Debian's generic kernel, which has rdma_rxe as a module) and
# out/initramfs.cpio.gz (busybox, the RDMA modules, sch_netem, and the
# host's own rdma-core user space: ibverbs-utils, rdmacm-utils, perftest,
# iproute2's rdma and tc).  The kernel and busybox-static .debs are fetched
# with `apt-get download` into $SRN_INTEROP_DIR/cache and never installed.
# KVER=6.1.0-57-amd64 pins a kernel; the default is linux-image-amd64's.
# The -cloud- flavour cannot be used: it is built without rdma_rxe.
# SRN_INTEROP_SIW=1 also builds siw.ko (Debian builds no SoftiWARP) from
# linux-source against linux-headers-KVER (installs both, once; for a
# later iWARP suite).  Takes ~20 s once the .debs are cached.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT="$IO_OUT/rootfs"
mkdir -p "$IO_CACHE" "$IO_OUT"

for t in depmod:kmod modprobe:kmod cpio:cpio dpkg-deb:dpkg rdma:iproute2 tc:iproute2 \
	ibv_rc_pingpong:ibverbs-utils rping:rdmacm-utils ib_write_bw:perftest; do
	command -v "${t%%:*}" >/dev/null 2>&1 ||
		{ echo "missing ${t%%:*} (apt-get install ${t#*:})" >&2; exit 1; }
done

# kver: the kernel ABI linux-image-amd64 depends on (empty before apt-get update)
kver() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ {sub("linux-image-", "", $2); print $2; exit}'
}
if [ -z "${KVER:-}" ]; then
	KVER=$(kver)
	[ -n "$KVER" ] || [ "$(id -u)" -ne 0 ] || { apt-get update -qq && KVER=$(kver); }
	[ -n "$KVER" ] || { echo "cannot resolve linux-image-amd64 (apt-get update?)" >&2; exit 1; }
fi
io_log "kernel linux-image-$KVER"

# deb PACKAGE: the cached .deb's path, downloaded first if missing
deb() {
	local f
	f=$(ls "$IO_CACHE/$1"_*.deb 2>/dev/null | head -n1 || true)
	if [ -z "$f" ]; then
		(cd "$IO_CACHE" && timeout 600 apt-get download "$1" >/dev/null) ||
			{ echo "apt-get download $1 failed" >&2; exit 1; }
		f=$(ls "$IO_CACHE/$1"_*.deb | head -n1)
	fi
	echo "$f"
}
KDEB=$(deb "linux-image-$KVER")
KROOT="$IO_CACHE/kernel-$KVER"
if [ ! -e "$KROOT/boot/vmlinuz-$KVER" ]; then
	rm -rf "$KROOT"; mkdir -p "$KROOT"; dpkg-deb -x "$KDEB" "$KROOT"
fi
grep -q '^CONFIG_RDMA_RXE=[my]' "$KROOT/boot/config-$KVER" ||
	{ echo "kernel $KVER has no rdma_rxe" >&2; exit 1; }
[ -e "$KROOT/lib/modules/$KVER/modules.dep" ] || depmod -b "$KROOT" "$KVER"
BBDEB=$(deb busybox-static)
BB="$IO_CACHE/busybox"
[ -x "$BB/bin/busybox" ] || { rm -rf "$BB"; mkdir -p "$BB"; dpkg-deb -x "$BBDEB" "$BB"; }

# ---- root file system: busybox for everything but what is copied below
rm -rf "$ROOT"
mkdir -p "$ROOT"/{bin,usr/bin,usr/sbin,usr/lib,usr/lib64,etc/libibverbs.d,proc,sys,dev,tmp,run,root}
ln -s usr/lib "$ROOT/lib"; ln -s usr/lib64 "$ROOT/lib64"; ln -s bin "$ROOT/sbin"
cp "$BB/bin/busybox" "$ROOT/bin/"
for a in $("$BB/bin/busybox" --list); do
	[ "$a" = busybox ] || [ "$a" = tc ] || ln -sf busybox "$ROOT/bin/$a"
done

# ---- modules, in load order (with what each depends on, once)
MDIR="lib/modules/$KVER"
mkdir -p "$ROOT/usr/$MDIR"
: >"$ROOT/etc/modules.order"
# mods MODULE...: each with what it depends on, once, appended to the load order
mods() {
	local m kw path rel
	for m in "$@"; do
		modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" | while read -r kw path _; do
			[ "$kw" = insmod ] || continue
			rel=${path#"$KROOT"/}
			grep -qxF "/$rel" "$ROOT/etc/modules.order" && continue
			mkdir -p "$(dirname "$ROOT/usr/$rel")"
			cp "$path" "$ROOT/usr/$rel"
			echo "/$rel" >>"$ROOT/etc/modules.order"
		done
	done
}
mods virtio_pci virtio_net crc32_generic crc32_pclmul udp_tunnel ip6_udp_tunnel ib_core \
	ib_uverbs rdma_rxe sch_netem sch_ingress cls_matchall act_mirred ifb configfs ib_cm iw_cm \
	rdma_cm rdma_ucm
SIWKO="$IO_CACHE/siw-$KVER.ko"
if [ "${SRN_INTEROP_SIW:-0}" = 1 ] && [ ! -e "$SIWKO" ]; then
	SRCPKG=linux-source-$(echo "$KVER" | cut -d. -f1-2)
	apt-get install -y --no-install-recommends "linux-headers-$KVER" "$SRCPKG" >/dev/null
	SB=$(mktemp -d); trap 'rm -rf "$SB"' EXIT
	tar -C "$SB" -xf "/usr/src/$SRCPKG.tar.xz" --wildcards "$SRCPKG/drivers/infiniband/sw/siw/*"
	make -s -C "/usr/src/linux-headers-$KVER" M="$SB/$SRCPKG/drivers/infiniband/sw/siw" \
		CONFIG_RDMA_SIW=m modules >"$IO_CACHE/siw-build.log" 2>&1
	cp "$SB/$SRCPKG/drivers/infiniband/sw/siw/siw.ko" "$SIWKO"
fi
rm -f "$IO_OUT/SIW"
if [ -e "$SIWKO" ]; then
	# siw's depends (ib_core, libcrc32c) and the crc32c it asks the crypto
	# API for (MPA CRC): no modprobe in the guest to fetch it on demand
	mods libcrc32c crc32c_generic crc32c_intel
	mkdir -p "$ROOT/usr/$MDIR/extra"
	cp "$SIWKO" "$ROOT/usr/$MDIR/extra/"
	echo "/$MDIR/extra/siw.ko" >>"$ROOT/etc/modules.order"
fi
for f in modules.order modules.builtin modules.builtin.modinfo; do
	[ -e "$KROOT/$MDIR/$f" ] && cp "$KROOT/$MDIR/$f" "$ROOT/usr/$MDIR/"
done
depmod -b "$ROOT/usr" "$KVER"

# ---- user space from the host, with its shared libraries
# put HOSTPATH: the file at the same path in the guest (/lib, /bin under /usr)
put() {
	local dst=$1
	case $dst in /lib/* | /lib64/* | /bin/* | /sbin/*) dst=/usr$dst ;; esac
	[ -e "$ROOT$dst" ] && return 0
	mkdir -p "$(dirname "$ROOT$dst")"
	cp -L "$1" "$ROOT$dst"
}
LIBDIR=/usr/lib/x86_64-linux-gnu
PROGS="rdma tc ip ibv_devices ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong
	rping ucmatose ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat
	ib_atomic_bw ib_atomic_lat"
FILES="$LIBDIR/libgcc_s.so.1 $(ls $LIBDIR/libibverbs/librxe-rdmav*.so $LIBDIR/libibverbs/libsiw-rdmav*.so 2>/dev/null)"
for p in $PROGS; do FILES="$FILES $(command -v "$p")"; done
for f in $FILES; do
	put "$f"
	ldd "$f" | awk '/=> \// {print $3} /^\t\/[^ ]+ \(/ {print $1}' |
		while read -r lib; do put "$lib"; done
done
# rdma-core's libibverbs (not softrnic's) inside: only the kernel's providers
echo "driver rxe" >"$ROOT/etc/libibverbs.d/rxe.driver"
echo "driver siw" >"$ROOT/etc/libibverbs.d/siw.driver"
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
echo "127.0.0.1 localhost" >"$ROOT/etc/hosts"
echo "hosts: files" >"$ROOT/etc/nsswitch.conf"
# softrnic's checked RC stream (tests/net/rc_stream_check.c), when built:
# a verbs program, so in the guest it runs on rdma-core and rxe (its
# run path to softrnic's build does not exist there; no ldd copy)
[ -x "$SRN_BUILD/tests/rc_stream_check" ] && install -m 0755 "$SRN_BUILD/tests/rc_stream_check" "$ROOT/usr/bin/"
install -m 0755 "$IO_SRC/guest/init" "$ROOT/init"
for s in "$IO_SRC"/guest/io-*; do install -m 0755 "$s" "$ROOT/usr/bin/"; done
{
	echo "kernel linux-image-$KVER $(dpkg-deb -f "$KDEB" Version)"
	echo "busybox-static $(dpkg-deb -f "$BBDEB" Version)"
	for p in libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils rdmacm-utils perftest iproute2; do
		echo "$p $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)"
	done
} >"$ROOT/etc/versions"

cp "$KROOT/boot/vmlinuz-$KVER" "$IO_OUT/vmlinuz"
(cd "$ROOT" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --owner=0:0 --quiet) | gzip -6 >"$IO_OUT/initramfs.cpio.gz"
echo "$KVER" >"$IO_OUT/KVER"
[ -e "$SIWKO" ] && echo "siw $(modinfo -F vermagic "$SIWKO")" >"$IO_OUT/SIW"
cat "$ROOT/etc/versions"
io_log "modules $(wc -l <"$ROOT/etc/modules.order"), initramfs $(du -h "$IO_OUT/initramfs.cpio.gz" | cut -f1) in $IO_OUT"
