#!/usr/bin/env bash
# scripts/sanitize-check.sh asan|tsan [CTEST ARGS...]: configure a sanitizer
# build beside the normal one, build it, run its tests (docs/sanitizers.md).
#   asan  build-asan/, ASan + UBSan: the whole suite but the few tests below
#   tsan  build-tsan/, TSan: the tests where threads or processes race
# Ends with ctest's summary; the exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
[ $# -gt 0 ] && shift
JOBS=${JOBS:-2}

# Left out of the ASan run, each for a reason:
#   e2e/fuzz_smoke  builds its own clang ASan+UBSan tree (tests/fuzz); a
#                   second copy of it here only costs minutes
#   e2e/install     a packaging check (cmake --install, cpack): no new code runs
ASAN_SKIP='^(e2e/fuzz_smoke|e2e/install)$'

# The TSan run: tests whose threads (or processes sharing memory) race on
# softrnic's state, on both paths.  See docs/sanitizers.md for the why.
TSAN_TESTS='^(udp/)?(unit/(test_shm_ring|test_wake_pipe|test_cq_push|test_registry|test_registry_qpinfo|test_port_takeover)'
TSAN_TESTS+='|api/(test_qp_threads|test_cq_pollers|test_cq_event_waiters|test_post_wait|test_async'
TSAN_TESTS+='|test_engine_takeover|test_quiet_poll|test_write_spin|test_ack_handoff|test_cm_event_loop'
TSAN_TESTS+='|test_direct_send_mp|test_shm_ring_path|test_many_procs|test_rc_peer_death|test_cm_teardown_mr))$'

case $mode in
asan) dir=${BUILD:-build-asan}; san=address,undefined; select=(-E "$ASAN_SKIP") ;;
tsan) dir=${BUILD:-build-tsan}; san=thread; select=(-R "$TSAN_TESTS") ;;
*) echo "usage: $0 asan|tsan [CTEST ARGS...]" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" -DSOFTRNIC_SANITIZE="$san" >/dev/null
cmake --build "$dir" -j "$JOBS"
cd "$dir"
ctest --output-on-failure --timeout 900 -j 1 "${select[@]}" "$@"
