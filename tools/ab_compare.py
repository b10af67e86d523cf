#!/usr/bin/env python3
"""Compares two runs of one benchmark (old and new binary, same machine, same
run) from their text tables: bench/collectives (the tuned 'auto' time of
every collective and size, plus both forced paths) or bench/ll_latency (the
tuned time per size). Prints, per table, the geometric mean of new/old and
the worst size, and exits 1 when a table's geomean is above --geomean or any
size is above --worst (defaults: the team-routines issue's 1.03 and 1.08).

usage: ab_compare.py OLD.txt NEW.txt [--geomean 1.03] [--worst 1.08]
"""
import math
import re
import sys


def tables(path):
    """{(table, column): {size: us}} from a collectives or ll_latency log."""
    out = {}
    name = None
    for line in open(path, errors="replace"):
        m = re.match(r"# (\w+), \d+ ranks", line)
        if m:
            name = m.group(1)
            continue
        if line.startswith("# bench/ll_latency"):
            name = "ll_latency"
            continue
        f = line.split()
        if not f or not f[0].isdigit() or name is None:
            continue
        try:
            if name == "ll_latency":
                if len(f) >= 13:
                    out.setdefault((name, "tuned"), {})[int(f[0])] = float(f[5])
            elif len(f) >= 16:
                for col, idx in (("auto", 4), ("latency", 8), ("throughput", 12)):
                    v = float(f[idx])
                    if v > 0:
                        out.setdefault((name, col), {})[int(f[0])] = v
        except ValueError:
            continue
    return out


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    opts = dict(zip(argv[1::1], argv[2::1]))
    gmax = float(opts.get("--geomean", 1.03))
    wmax = float(opts.get("--worst", 1.08))
    old, new = tables(args[0]), tables(args[1])
    bad = False
    print("%-16s %-11s %6s %9s %9s %s" % ("table", "column", "sizes", "geomean", "worst", "at"))
    for key in sorted(old):
        if key not in new:
            continue
        common = sorted(set(old[key]) & set(new[key]))
        if not common:
            continue
        r = {s: new[key][s] / old[key][s] for s in common}
        g = math.exp(sum(math.log(v) for v in r.values()) / len(r))
        ws = max(r, key=r.get)
        flag = ""
        if key[1] in ("auto", "tuned") and (g > gmax or r[ws] > wmax):
            flag = "  <-- over"
            bad = True
        print("%-16s %-11s %6d %9.3f %9.3f %d B%s" % (key[0], key[1], len(r), g, r[ws], ws, flag))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
