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

# Left out of the ASan run, each for a reason (docs/sanitizers.md):
#   e2e/fuzz_smoke       builds its own clang ASan+UBSan tree (tests/fuzz)
#   e2e/install          a packaging check; it links a program of its own,
#                        uninstrumented, against the installed library
#   e2e/perftest_ud_uc   the slowest test (every size to 8 MiB, UD and UC):
#                        ~3-4 min a path under ASan; UD and UC stay covered
#                        by test_ud, test_direct_ud/uc, test_uc_loss and the
#                        ud/uc pingpongs
#   api/test_rkey_guess  its default path reconnects a QP pair for each of
#                        134k guesses (~55 s unsanitized); udp/ runs it
ASAN_SKIP='^((udp/)?e2e/perftest_ud_uc|e2e/fuzz_smoke|e2e/install|api/test_rkey_guess)$'

# The TSan run: tests where several threads of one process act on
# softrnic's state at once, on both paths; docs/sanitizers.md says which
# tests TSan cannot judge and why.
TSAN_UNIT='test_cq_push|test_mr_share|test_port_takeover|test_registry|test_registry_qpinfo'
TSAN_UNIT+='|test_shm_ring|test_srq_limit|test_wake_pipe'
TSAN_API='test_async|test_cm_conn|test_cm_rnr|test_cm_teardown_mr|test_cq_event_waiters'
TSAN_API+='|test_cq_pollers|test_direct_send|test_direct_send_srq|test_engine_takeover'
TSAN_API+='|test_post_wait|test_qp_reset_cq|test_qp_threads|test_quiet_poll|test_rc_peer_death'
TSAN_API+='|test_rsocket'
TSAN_TESTS="^(unit/($TSAN_UNIT)|(udp/)?api/($TSAN_API))\$"

case $mode in
asan) dir=${BUILD:-build-asan}; san=address,undefined; select=(-E "$ASAN_SKIP") ;;
tsan) dir=${BUILD:-build-tsan}; san=thread; select=(-R "$TSAN_TESTS") ;;
*) echo "usage: $0 asan|tsan [CTEST ARGS...]" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" -DSOFTRNIC_SANITIZE="$san" >/dev/null
cmake --build "$dir" -j "$JOBS"
cd "$dir"
ctest --output-on-failure --timeout 900 -j 1 "${select[@]}" "$@"
