#!/usr/bin/env python3
"""sass_stack.py -- where a cubin's local-memory traffic is. Reads
`nvdisasm -g -c x.cubin` (stdin) and prints, per function (a kernel, and
each __noinline__ routine that ptxas placed in its kernel's section as a
`$kernel$routine` label), its instructions, its STL / LDL (spills, saved
registers, local arrays), and the lowest and highest stack offset
([R1 + x]) they touch; with -f NAME (a substring of a mangled name), the
STL / LDL of that function counted by source line; with -p, every
innermost poll loop (a backward branch whose body has a strong load: a
volatile or acquire poll) with its instructions and STL / LDL, its
slow checks included -- a poll loop that touches the stack on its fast
path reloads what it waits for on every pass.

    nvdisasm -g -c megakernel.sm_90.cubin | tools/sass_stack.py [-f megakernelLatencyILb1EL16purlinDataType_t2] [-p]
    tools/sass.sh persistent/megakernel.cu | tools/sass_stack.py -p    (tools/sass.sh: a cubin's SASS here, no GPU)
"""
import collections
import re
import sys


def main():
    args = sys.argv[1:]
    polls = "-p" in args
    want = args[args.index("-f") + 1] if "-f" in args else None
    funcs = []
    cur = None
    src = "?"
    for raw in sys.stdin:
        m = re.match(r"^\s*\.text\.(\S+):", raw) or re.match(r"^\$[^$\s]+\$(\S+):", raw)
        if m:
            cur = {"name": m.group(1), "n": 0, "stl": 0, "ldl": 0, "offs": set(),
                   "lines": collections.Counter(), "ins": [], "labels": {}}
            funcs.append(cur)
            continue
        if cur is None:
            continue
        m = re.match(r"^(\.L_x_\d+):", raw)
        if m:
            cur["labels"][m.group(1)] = len(cur["ins"])
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
        cur["ins"].append((ins, src))
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
    if polls:
        print("\npoll loops: %8s %5s %5s  %-24s %s" % ("ins", "STL", "LDL", "first line", "function"))
        for f in funcs:
            for lo, hi in poll_loops(f):
                body = f["ins"][lo:hi + 1]
                stl = sum(1 for i, _ in body if re.search(r"\bSTL", i))
                ldl = sum(1 for i, _ in body if re.search(r"\bLDL", i))
                print("            %8d %5d %5d  %-24s %s" % (len(body), stl, ldl, body[0][1],
                                                           f["name"][:70]))
    for f in funcs:
        if want and want in f["name"]:
            print("\n===== %s" % f["name"])
            for (src, kind), n in sorted(f["lines"].items()):
                print("  %-30s %s %d" % (src, kind, n))


STRONG_LOAD = re.compile(r"\bLDG?\.E[.\w]*\.STRONG\.(SYS|GPU)")


def poll_loops(f):
    """(first, last) instruction indices of the innermost backward-branch
    loops of f whose bodies hold a strong (volatile or acquire) load."""
    loops = []
    for i, (ins, _) in enumerate(f["ins"]):
        m = re.search(r"\bBRA\b.*`\((\.L_x_\d+)\)", ins)
        if m and m.group(1) in f["labels"] and f["labels"][m.group(1)] <= i:
            loops.append((f["labels"][m.group(1)], i))
    polls = [(lo, hi) for lo, hi in loops
             if any(STRONG_LOAD.search(ins) for ins, _ in f["ins"][lo:hi + 1])]
    return [(lo, hi) for lo, hi in polls
            if not any(lo <= a and b <= hi and (a, b) != (lo, hi) for a, b in polls)]


main()
