#!/bin/sh
# exports_test.sh -- libpurlin.so exports the public API and nothing else:
# every defined dynamic symbol is purlin*, and every function of purlin.h is
# there.
set -eu
lib="$1"
header="$2"
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRW]$/ {print $3}')
bad=$(printf '%s\n' "$syms" | grep -v '^purlin' | grep -v '^_\(_bss_start\|edata\|end\)$' || true)
if [ -n "$bad" ]; then
  echo "FAIL: libpurlin.so exports non-purlin symbols:"; echo "$bad"; exit 1
fi
declared=$(grep -o '^PURLIN_API [^(]*(' "$header" | sed 's/.*[ *]\(purlin[A-Za-z0-9_]*\)(/\1/' | sort -u)
[ -n "$declared" ] || { echo "FAIL: no PURLIN_API declarations found in $header"; exit 1; }
missing=0
for f in $declared; do
  printf '%s\n' "$syms" | grep -qx "$f" || { echo "FAIL: $f is declared but not exported"; missing=1; }
done
[ "$missing" = 0 ] || exit 1
echo "exports ok: $(printf '%s\n' "$declared" | wc -l) functions, no other symbols"
