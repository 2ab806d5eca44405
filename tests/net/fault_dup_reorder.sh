#!/usr/bin/env bash
# Duplicated and reordered packets between two hosts: two network
# namespaces this test creates (192.168.96.0/24, addresses only inside
# them) joined through a third, where tests/impair_relay bridges them and
# duplicates 5% of the frames, or holds 1% of them back 1 ms (reordering
# them behind ~30 others).  rc_stream_check moves checked SENDs and
# WRITEs over RC, which must arrive intact, once and in order; and UC
# SENDs through both at once, which may be lost but never delivered
# twice, corrupted or out of order.  Rates are printed beside the clean
# bridge of the same run.  FAULT_LONG=1 moves 256 MiB each.  Root only;
# skips (77) otherwise.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/fault.sh"
fault_bridged fd 192.168.96 ""

fault_relay_case clean "RC, clean bridge" "" 16 "-t rc -o mix"
CLEAN=$(fault_mbs clean)
fault_relay_case dup "RC, 5% duplicated" "-D 50" 16 "-t rc -o mix"
fault_relay_case reorder "RC, 1% reordered by 1 ms" "-R 10" 8 "-t rc -o mix"
fault_relay_case uc "UC, 5% duplicated, 1% reordered" "-D 50 -R 10" 16 "-t uc -o send -s 4096 -L 50"
t_done
