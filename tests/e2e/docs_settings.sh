#!/usr/bin/env bash
# The docs cannot drift from the code: every variable in net/settings.c's
# table is described in docs/configuration.md and docs/softrnic.7, and both
# man pages render without a warning.
. "$(dirname "$0")/../lib/e2e.sh"
src=$SRN_SOURCE
# One table entry a setting: [SRN_SET_X] = { "SOFTRNIC_X", ...
entries=$(grep -c '^[[:space:]]*\[SRN_SET_[A-Z0-9_]*\] = {' "$src/net/settings.c")
names=$(grep -o '\[SRN_SET_[A-Z0-9_]*\] = { "SOFTRNIC_[A-Z0-9_]*"' "$src/net/settings.c" |
	grep -o 'SOFTRNIC_[A-Z0-9_]*')
count=$(echo "$names" | grep -c .)
if [ "$entries" -gt 0 ] && [ "$count" -eq "$entries" ]; then
	t_pass "net/settings.c: $count variables in $entries table entries"
else
	t_fail "net/settings.c: read $count names from $entries table entries"
fi
for n in $names; do
	# configuration.md: in a table row of its own (| `NAME` |).
	if grep -qE "^\| \`$n\` \|" "$src/docs/configuration.md"; then
		t_pass "configuration.md describes $n"
	else
		t_fail "configuration.md has no row for $n"
	fi
	# softrnic.7: a tagged paragraph (.TP / .B NAME) under ENVIRONMENT.
	if sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' "$src/docs/softrnic.7" | grep -qx "\.B $n"; then
		t_pass "softrnic.7 describes $n"
	else
		t_fail "softrnic.7 has no ENVIRONMENT entry for $n"
	fi
done

# Render: man's own warnings when man is here, else groff's.
for page in softrnic.1 softrnic.7; do
	f=$src/docs/$page
	if command -v man >/dev/null; then
		warn=$(MANWIDTH=80 timeout 30 man --warnings=w -l "$f" 2>&1 >"$T_TMP/$page.txt")
	elif command -v groff >/dev/null; then
		warn=$(timeout 30 groff -man -ww -Tutf8 "$f" 2>&1 >"$T_TMP/$page.txt")
	else
		t_skip "neither man nor groff installed"
	fi
	if [ -z "$warn" ] && [ -s "$T_TMP/$page.txt" ]; then
		t_pass "$page renders without warnings ($(wc -l <"$T_TMP/$page.txt") lines)"
	else
		t_fail "$page rendering:"; echo "$warn" | sed 's/^/    | /' | head -20
	fi
done
t_done
