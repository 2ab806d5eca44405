#!/usr/bin/env bash
# A short libFuzzer run of each target in tests/fuzz (packet codec; the
# engine's receive side against live RC/UC/UD QPs with guard pages; the CM's
# MAD receive path; the same-host inbox and CQ/RQ rings against a hostile
# peer), built with clang, ASan and UBSan in a build directory of its own.
# `make fuzz` runs them longer (FUZZ_SECONDS); docs/fuzzing.md has more.
# Any crash, sanitizer report or escaped write fails the test and leaves
# the input in $SRN_BUILD/fuzz-build/crashes.
. "$(dirname "$0")/../lib/e2e.sh"
t_need clang cmake
# make check: a few seconds each (6 targets); make fuzz sets more
SECS=${FUZZ_SECONDS:-8}
TARGETS="fuzz_wire_decode fuzz_iwarp_codec fuzz_responder fuzz_cm_mad fuzz_shm_ring fuzz_shared_rings"
FB="$SRN_BUILD/fuzz-build"
# libFuzzer ships in libclang-rt-NN-dev: try a tiny link before building all.
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$T_TMP/p.c"
clang -fsanitize=fuzzer,address "$T_TMP/p.c" -o "$T_TMP/p" >/dev/null 2>&1 ||
	t_skip "clang cannot link libFuzzer (libclang-rt-dev missing)"

if cmake -S "$SRN_SOURCE" -B "$FB" -DCMAKE_C_COMPILER=clang -DSOFTRNIC_FUZZ=ON \
	-DSOFTRNIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >"$T_TMP/cmake.out" 2>&1 &&
   cmake --build "$FB" -j 2 --target $TARGETS >>"$T_TMP/cmake.out" 2>&1; then
	t_pass "fuzz targets built with clang -fsanitize=fuzzer,address,undefined"
else
	t_fail "fuzz build"; tail -30 "$T_TMP/cmake.out"; t_done; exit
fi

mkdir -p "$FB/crashes"
for f in $TARGETS; do
	corpus="$FB/corpus-$f"
	mkdir -p "$corpus"
	# checked-in seeds (read only: new inputs go to the first directory)
	seeds="$SRN_SOURCE/tests/fuzz/seeds/$f"
	[ -d "$seeds" ] || seeds=
	# bounded: libFuzzer stops at max_total_time, timeout is the backstop
	if (cd "$FB/crashes" && UBSAN_OPTIONS=halt_on_error=1 timeout -k 5 $((SECS + 60)) \
		"$FB/fuzz/$f" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1500 \
		-print_final_stats=1 "$corpus" $seeds >"$T_TMP/$f.out" 2>&1); then
		runs=$(awk '/number_of_executed_units/ {print $NF+0}' "$T_TMP/$f.out")
		[ "${runs:-0}" -gt 100 ] && t_pass "$f: $runs inputs in ${SECS}s, no crash" ||
			{ t_fail "$f ran only ${runs:-0} inputs"; tail -20 "$T_TMP/$f.out"; }
	else
		t_fail "$f found a crash (input kept in $FB/crashes)"
		grep -E "ERROR|SUMMARY|fuzz_|#[0-9] " "$T_TMP/$f.out" | head -30
	fi
done
t_done
