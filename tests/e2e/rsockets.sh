#!/usr/bin/env bash
# Debian's unmodified rstream and rcopy (rdmacm-utils: rsockets, streams
# over RDMA) over softrnic, server and client in separate processes on
# 127.0.0.1.  Both ends are softrnic: our rsockets speak their own protocol,
# not rdma-core's (no interop with a real librdmacm's rsockets).
# rstream: its default run (latency then bandwidth, 64 B .. 1 MiB, two
# connections one after the other) and custom runs in each I/O mode
# (non-blocking spin, blocking, rpoll-driven), with -T v so rstream
# checks every byte.  riostream (riomap/riowrite): transfer runs and a
# ping-pong on the last byte.
# rcopy: files copied and compared with cmp.
. "$(dirname "$0")/../lib/e2e.sh"
t_need rstream rcopy cmp

rstream_one() { # label expected-result-lines args...
	local label=$1 want=$2; shift 2
	local port; port=$(t_port)
	local name="rstream$port" c s
	if t_pair "$name" 60 "rstream -b 127.0.0.1 -p $port $*" \
			   "rstream -s 127.0.0.1 -p $port $*"; then
		# result lines: name size xfers iters total time Gb/sec usec/xfer
		c=$(grep -cE '^[0-9a-z_]+ +[0-9.]+[kmg]? +[0-9]+[kmb]? +[0-9]+[kmb]? .*[0-9.]+s +[0-9.]+ +[0-9.]+$' "$T_TMP/$name.client")
		s=$(grep -cE '^[0-9a-z_]+ +[0-9.]+[kmg]? +[0-9]+[kmb]? +[0-9]+[kmb]? .*[0-9.]+s +[0-9.]+ +[0-9.]+$' "$T_TMP/$name.server")
		if [ "$c" -eq "$want" ] && [ "$s" -eq "$want" ]; then
			t_pass "rstream $label: $want result lines on both sides, both exit 0"
		else
			t_fail "rstream $label: client $c, server $s of $want result lines"
			sed 's/^/    | /' "$T_TMP/$name.client" | tail -12
		fi
	else
		t_fail "rstream $label"
	fi
}

rstream_one "default run (lat + bw, 64 B .. 1 MiB)" 8
rstream_one "-S 64 -C 1000 -T v (non-blocking)" 1 -S 64 -C 1000 -T v
rstream_one "-S 1000000 -C 30 -T v" 1 -S 1000000 -C 30 -T v
rstream_one "-S 4096 -C 1000 -T b -T v (blocking)" 1 -S 4096 -C 1000 -T b -T v
rstream_one "-S 65536 -C 100 -T a -T v (rpoll)" 1 -S 65536 -C 100 -T a -T v
rstream_one "-S 100 -C 10 -I 100 -T b (latency)" 1 -S 100 -C 10 -I 100 -T b

# riostream: riomap + riowrite (RDMA WRITE into the peer's mapped buffer).
# Transfer runs (-C N, one marker wait per side), and a ping-pong (-C 1
# -I 1000) where each side spins on the last byte of its buffer and then
# writes its own marker there: it stalled in about half the runs while
# WRITEs were placed with memcpy, which stores a 64-byte copy twice
# (transport/place.h).
riostream_one() { # label args...
	local label=$1; shift
	local port; port=$(t_port)
	local name="riostream$port" c s
	if t_pair "$name" 60 "riostream -b 127.0.0.1 -p $port $*" \
			   "riostream -s 127.0.0.1 -p $port $*"; then
		c=$(grep -c '^custom ' "$T_TMP/$name.client")
		s=$(grep -c '^custom ' "$T_TMP/$name.server")
		if [ "$c" -eq 1 ] && [ "$s" -eq 1 ]; then
			t_pass "riostream $label: result on both sides, both exit 0"
		else
			t_fail "riostream $label: client $c, server $s result lines"
		fi
	else
		t_fail "riostream $label"
	fi
}
if command -v riostream >/dev/null 2>&1; then
	riostream_one "-S 64 -C 1000 -T v" -S 64 -C 1000 -T v
	riostream_one "-S 100000 -C 100 -T v" -S 100000 -C 100 -T v
	riostream_one "-S 64 -C 1 -I 1000 (ping-pong on the last byte)" -S 64 -C 1 -I 1000
fi

# rcopy: the server serves copies until killed; each client copies one file.
port=$(t_port)
timeout -k 2 60 "$SOFTRNIC" run -- rcopy -p "$port" >"$T_TMP/rcopy.server" 2>&1 &
spid=$!
sleep 0.3
head -c 3000000 /dev/urandom >"$T_TMP/big.src"
printf 'hello over rsockets\n' >"$T_TMP/small.src"
head -c 65536 /dev/urandom >"$T_TMP/seg.src"
for f in big small seg; do
	if timeout -k 2 30 "$SOFTRNIC" run -- rcopy "$T_TMP/$f.src" "127.0.0.1:$T_TMP/$f.dst" -p "$port" \
			>"$T_TMP/rcopy.$f.client" 2>&1 &&
	   cmp -s "$T_TMP/$f.src" "$T_TMP/$f.dst"; then
		t_pass "rcopy $f ($(stat -c %s "$T_TMP/$f.src") bytes): exit 0, the copy is identical"
	else
		t_fail "rcopy $f"
		sed 's/^/    | /' "$T_TMP/rcopy.$f.client" | tail -5
	fi
done
# The server's close of the last copy may still run when its client has
# exited: its FIN then finds no QP and rclose waits out its linger (2 s)
# for the ACK.  Let it end (bounded) before the server is stopped.
for i in $(seq 50); do
	[ "$(grep -c "closing...done" "$T_TMP/rcopy.server")" -ge 3 ] && break
	sleep 0.1
done
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
n=$(grep -c "closing...done" "$T_TMP/rcopy.server")
if [ "$n" -eq 3 ]; then
	t_pass "rcopy server: 3 copies served, each closed cleanly"
else
	t_fail "rcopy server: $n of 3 copies closed cleanly"
	sed 's/^/    | /' "$T_TMP/rcopy.server" | tail -8
fi
t_done
