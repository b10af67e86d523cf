#!/usr/bin/env python3
"""Compares two runs of one benchmark (old and new binary, same machine, same
run) from their text tables: bench/collectives (the tuned 'auto' time of
every collective and size, both forced paths, and the session's sess+wait
column where the run has sessions) or bench/ll_latency (the tuned time per
size). Several passes of a side, comma-separated, count as their minimum
per cell. Prints, per table, the geometric mean of new/old and the worst
size (with --cells, every size too), and the #wrong of each side; exits 1
when a table's tuned geomean is above --geomean or a tuned size above
--worst (defaults: the team-routines issue's 1.03 and 1.08), or when
either side counted a wrong element.

usage: ab_compare.py OLD.txt[,OLD2.txt...] NEW.txt[,NEW2.txt...]
                     [--geomean 1.03] [--worst 1.08] [--cells]
"""
import math
import re
import sys


def num(field):
    """The field as a number, None for '-' or text."""
    try:
        return float(field)
    except ValueError:
        return None


def tables(path, wrong):
    """{(table, column): {size: us}} from a collectives or ll_latency log;
    adds the log's #wrong counts to wrong[0]."""
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
        if name == "ll_latency":
            if len(f) >= 13 and num(f[5]) is not None:
                out.setdefault((name, "tuned"), {})[int(f[0])] = num(f[5])
        elif len(f) >= 16:
            # A forced path that refused a size prints "-" in its columns.
            for col, idx in (("auto", 4), ("latency", 8), ("throughput", 12)):
                v = num(f[idx])
                if v is not None and v > 0:
                    out.setdefault((name, col), {})[int(f[0])] = v
            for idx in (7, 11, 15):
                wrong[0] += int(num(f[idx]) or 0)
            # Sessions: sess+wait after AllReduce's /barrier column, and the
            # session's #wrong 4 columns on.
            sess = 20 if name == "AllReduce" else 19
            if len(f) > sess + 4 and num(f[sess]) is not None:
                out.setdefault((name, "session"), {})[int(f[0])] = num(f[sess])
                wrong[0] += int(num(f[sess + 4]) or 0)
    return out


def passes(arg, wrong):
    """The minimum per cell over the comma-separated logs of one side."""
    out = {}
    for path in arg.split(","):
        for key, cells in tables(path, wrong).items():
            best = out.setdefault(key, {})
            for size, us in cells.items():
                best[size] = min(us, best.get(size, us))
    return out


def main(argv):
    args, opts, i = [], {}, 1
    while i < len(argv):
        if argv[i] == "--cells":
            opts["--cells"] = True
        elif argv[i].startswith("--") and i + 1 < len(argv):
            opts[argv[i]] = argv[i + 1]
            i += 1
        else:
            args.append(argv[i])
        i += 1
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    gmax = float(opts.get("--geomean", 1.03))
    wmax = float(opts.get("--worst", 1.08))
    wrongOld, wrongNew = [0], [0]
    old, new = passes(args[0], wrongOld), passes(args[1], wrongNew)
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
        if opts.get("--cells"):
            for s in common:
                print("%30s %12d B %10.2f %10.2f us %7.3f" % ("", s, old[key][s], new[key][s], r[s]))
    print("#wrong: old %d, new %d" % (wrongOld[0], wrongNew[0]))
    return 1 if bad or wrongOld[0] or wrongNew[0] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
