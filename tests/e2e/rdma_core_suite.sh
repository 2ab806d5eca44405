#!/usr/bin/env bash
# rdma-core v44's own test suite (python3-pyverbs ships it gzipped in
# /usr/share/doc/rdma-core/tests), unmodified, against srn_lo through
# `softrnic run`: no test may end in an error or a failure, and a good
# number must run rather than skip. Prints the summary, every error or
# failure, and the skip reasons with their counts.
. "$(dirname "$0")/../lib/e2e.sh"
SUITE=/usr/share/doc/rdma-core/tests
t_need python3
[ -f "$SUITE/run_tests.py" ] || t_skip "python3-pyverbs (rdma-core's tests) not installed"
/usr/bin/python3 -c 'import pyverbs.device' 2>/dev/null || t_skip "python3-pyverbs not importable"

dir="$T_TMP/tests"
cp -r "$SUITE" "$dir" && gunzip -q "$dir"/*.gz || { t_fail "copy and gunzip $SUITE"; t_done; exit; }

log="$T_TMP/suite.log"
( cd "$dir" && timeout -k 5 480 "$SOFTRNIC" run -- /usr/bin/python3 run_tests.py --dev srn_lo -v ) \
	>"$log" 2>&1
rc=$?
ran=$(sed -n 's/^Ran \([0-9]*\) tests\? in .*/\1/p' "$log" | tail -1)
result=$(grep -E '^(OK|FAILED)( \(|$)' "$log" | tail -1)
skipped=$(echo "$result" | sed -n 's/.*skipped=\([0-9]*\).*/\1/p')
echo "  summary: ran ${ran:-?}, ${result:-no result line}"

if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	t_fail "the suite finishes within 480 s (it hung; the last tests started:)"
	grep -E ' \.\.\. ' "$log" | tail -5 | sed 's/^/    | /'
	tail -5 "$log" | sed 's/^/    | /'
elif [ "$rc" -eq 0 ] && [ "${result%% *}" = OK ]; then
	t_pass "the suite exits 0 with OK (no error, no failure)"
else
	t_fail "the suite exits 0 with OK (exit $rc)"
fi
if grep -qE '^(ERROR|FAIL):' "$log"; then
	t_fail "no test ends in ERROR or FAIL:"
	grep -E '^(ERROR|FAIL):' "$log" | sed 's/^/    | /'
	# what each raised: the last line of its traceback
	awk '/^(ERROR|FAIL):/ { t = $2 } /^[A-Za-z_.]*(Error|Exception): / && t { print t ": " $0; t = "" }' \
		"$log" | head -40 | sed 's/^/    | /'
	grep -E '^.*Player (active|passive) got: .+' "$log" | head -20 | sed 's/^/    | /'
else
	t_pass "no test ends in ERROR or FAIL"
fi
# A device the suite cannot open skips everything: at least 50 must run.
unskipped=$(( ${ran:-0} - ${skipped:-0} ))
[ "$unskipped" -ge 50 ] && t_pass "$unskipped tests ran (not skipped)" ||
	t_fail "at least 50 tests ran (not skipped): $unskipped"

# Through the sysfs view the suite finds srn_lo's netdev (lo) and runs its
# rdma_cm tests (each starts two processes) instead of skipping them.
cm_ran=$(grep -cE '^test_rdmacm_[a-z_]+ \(.*\) \.\.\. ok$' "$log")
[ "$cm_ran" -ge 8 ] && t_pass "$cm_ran rdma_cm tests ran and passed" ||
	t_fail "the rdma_cm tests run (passed: $cm_ran; skips below)"

echo "  skip reasons (count, reason):"
sed -n "s/.* \.\.\. skipped [\"']\(.*\)[\"']\$/\1/p" "$log" | sort | uniq -c | sort -rn | sed 's/^/    /'
t_done
