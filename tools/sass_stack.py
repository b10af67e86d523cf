#!/usr/bin/env python3
"""sass_stack.py -- where a cubin's local-memory traffic is. Reads
`nvdisasm -g -c x.cubin` (stdin) and prints, per function (a kernel, and
each __noinline__ routine that ptxas placed in its kernel's section as a
`$kernel$routine` label), its instructions, its STL / LDL (spills, saved
registers, local arrays), and the lowest and highest stack offset
([R1 + x]) they touch; with -f NAME (a substring of a mangled name), the
STL / LDL of that function counted by source line.

    nvdisasm -g -c megakernel.sm_90.cubin | tools/sass_stack.py [-f megakernelLatencyILb1EL16purlinDataType_t2]
"""
import collections
import re
import sys


def main():
    want = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "-f" else None
    funcs = []
    cur = None
    src = "?"
    for raw in sys.stdin:
        m = re.match(r"^\s*\.text\.(\S+):", raw) or re.match(r"^\$[^$\s]+\$(\S+):", raw)
        if m:
            cur = {"name": m.group(1), "n": 0, "stl": 0, "ldl": 0, "offs": set(),
                   "lines": collections.Counter()}
            funcs.append(cur)
            continue
        if cur is None:
            continue
        m = re.search(r'//## File "([^"]+)", line (\d+)', raw)
        if m:
            src = "%s:%s" % (m.group(1).split("/")[-1], m.group(2))
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", raw)
        if not m:
            continue
        ins = m.group(1)
        cur["n"] += 1
        kind = "STL" if re.search(r"\bSTL", ins) else "LDL" if re.search(r"\bLDL", ins) else None
        if kind is None:
            continue
        cur["stl" if kind == "STL" else "ldl"] += 1
        cur["lines"][(src, kind)] += 1
        o = re.search(r"\[R1(?:\+(0x[0-9a-f]+))?\]", ins)
        if o:
            cur["offs"].add(int(o.group(1), 16) if o.group(1) else 0)
    print("%8s %6s %6s %7s %7s  %s" % ("ins", "STL", "LDL", "lo", "hi", "function"))
    for f in funcs:
        lo = min(f["offs"]) if f["offs"] else "-"
        hi = max(f["offs"]) if f["offs"] else "-"
        name = re.sub(r"_ZN\d+_INTERNAL_\w+?_cu_\w{8}\d+", "", f["name"])
        print("%8d %6d %6d %7s %7s  %s" % (f["n"], f["stl"], f["ldl"], lo, hi, name[:120]))
    for f in funcs:
        if want and want in f["name"]:
            print("\n===== %s" % f["name"])
            for (src, kind), n in sorted(f["lines"].items()):
                print("  %-30s %s %d" % (src, kind, n))


main()
