#!/usr/bin/env python3
"""sass_stack.py -- where a cubin's local-memory traffic is: per function
of `nvdisasm -g -c` output (stdin), its instructions, its STL / LDL
(spills, saved registers and local arrays) and its stack-pointer
adjustments; with -f NAME (a substring of a mangled name), that function's
SASS with its source lines, for reading.

    nvdisasm -g -c x.cubin | tools/sass_stack.py [-f megakernelLatencyILb1EL16purlinDataType_t2EL13purlinRedOp_t0]
"""
import re
import sys


def main():
    want = None
    if len(sys.argv) > 2 and sys.argv[1] == "-f":
        want = sys.argv[2]
    funcs = []
    cur = None
    line = ""
    for raw in sys.stdin:
        m = re.match(r"\s*\.text\.(\S+):", raw)
        if m:
            cur = {"name": m.group(1), "n": 0, "stl": 0, "ldl": 0, "sp": [], "body": []}
            funcs.append(cur)
            continue
        if cur is None:
            continue
        m = re.search(r"//## File \"([^\"]+)\", line (\d+)", raw)
        if m:
            line = "%s:%s" % (m.group(1).split("/")[-1], m.group(2))
            if want and want in cur["name"]:
                cur["body"].append("      // " + line)
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", raw)
        if not m:
            continue
        ins = m.group(1)
        cur["n"] += 1
        if re.search(r"\bSTL\b", ins):
            cur["stl"] += 1
        if re.search(r"\bLDL\b", ins):
            cur["ldl"] += 1
        if re.search(r"\bR1\b.*\bR1\b", ins) and ("IADD" in ins or "VIADD" in ins):
            cur["sp"].append(ins)
        if want and want in cur["name"]:
            cur["body"].append(ins)
    for f in funcs:
        print("%6d ins %5d STL %5d LDL  %-60s %s" % (f["n"], f["stl"], f["ldl"], f["name"][:150],
                                                    " | ".join(f["sp"][:3])))
    if want:
        for f in funcs:
            if want in f["name"]:
                print("\n===== %s" % f["name"])
                print("\n".join(f["body"]))


main()
