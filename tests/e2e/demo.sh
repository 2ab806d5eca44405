#!/usr/bin/env bash
# `make demo`'s program: two processes through every verb, data verified by
# the program itself; here we check it completes and reports each step.
. "$(dirname "$0")/../lib/e2e.sh"
out="$T_TMP/demo.out"
if timeout -k 2 120 "$SRN_BUILD/bin/softrnic-demo" -d srn_lo >"$out" 2>&1; then
	t_pass "softrnic-demo exits 0"
else
	t_fail "softrnic-demo exit status"; sed 's/^/    | /' "$out" | tail -20
fi
for step in "RDMA WRITE 65536 bytes -> completed" "RDMA READ 65536 bytes -> data verified" \
	"RECV 22 bytes" "RECV_RDMA_WITH_IMM: imm 42" "FETCH_AND_ADD +5 -> old value 100" \
	"CMP_AND_SWP 105 -> 7777 -> old value 105" "counter is now 7777" \
	"destroyed QP, CQ, MR, PD" "1 MiB RDMA WRITE bandwidth" "demo complete"; do
	if grep -qF "$step" "$out"; then t_pass "demo: $step"; else t_fail "demo: $step"; fi
done
t_done
