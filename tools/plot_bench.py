#!/usr/bin/env python3
"""Plots benchmark JSON to a PNG. Which benchmark wrote the file is told by
its top-level "benchmark" key when present:

- "collectives" (bench/collectives): time against size, log-log, one
  subplot per collective, one line per path (auto, latency, throughput),
  with the barrier-only floor on the AllReduce subplot.
- no key (bench/atoms): bandwidth against CTA count per Atom, with the
  cudaMemcpyAsync and plain-copy baselines.

usage: tools/plot_bench.py result.json result.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


COLLECTIVE_TITLES = {
    "allreduce": "AllReduce",
    "allgather": "AllGather",
    "reducescatter": "ReduceScatter",
    "alltoall": "AllToAll",
    "allgatherv": "AllGatherV",
    "reducescatterv": "ReduceScatterV",
    "alltoallv": "AllToAllV",
}
PATH_STYLES = (
    ("auto", "auto (tuned)", "C0", "o", "-"),
    ("latency", "latency (forced)", "C1", "s", "--"),
    ("throughput", "throughput (forced)", "C2", "^", "--"),
)


def plot_collectives(data, dst):
    """Time per call against size for each collective and path."""
    colls = []
    for row in data["rows"]:
        if row["collective"] not in colls:
            colls.append(row["collective"])
    if not colls:
        print(f"no rows in the collectives JSON; no plot written to {dst}")
        return
    ncols = min(len(colls), 4)
    nrows = (len(colls) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.8 * nrows), squeeze=False)
    barrier = data.get("floors", {}).get("barrier_us")
    for i, coll in enumerate(colls):
        ax = axes[i // ncols][i % ncols]
        rows = [r for r in data["rows"] if r["collective"] == coll]
        for key, label, color, marker, style in PATH_STYLES:
            pts = [(r["size"], r[key]["time_us"]) for r in rows
                   if r.get(key, {}).get("status") == "ok"]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, color=color, marker=marker, markersize=3, linestyle=style,
                        label=label)
        if coll == "allreduce" and barrier:
            ax.axhline(barrier, color="k", linestyle=":", label=f"barrier floor {barrier:.1f} us")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (B)")
        ax.set_ylabel("time per call (us)")
        ax.set_title(COLLECTIVE_TITLES.get(coll, coll))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for j in range(len(colls), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    m = data.get("machine", {})
    fig.suptitle(f"purlin collectives: {m.get('nranks', '?')} ranks on {m.get('gpu', '?')}"
                 f"{' (one GPU)' if m.get('one_gpu') else ''}, {data.get('dtype', '?')} "
                 f"{data.get('op', '')}")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot: {dst}")


def plot_atoms(data, dst):
    """Bandwidth against CTA count per Atom."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, atom in data["atoms"].items():
        ax.plot(atom["ctas"], atom["copy_GBps"], marker="o", label=f"{name} copy")
        for n in (2, 4, 8):
            key = f"reduce{n}_read_GBps"
            ax.plot(atom["ctas"], atom[key], marker=".", linestyle="--",
                    label=f"{name} reduce {n} (read)")
    ax.axhline(data["memcpy_GBps"], color="k", linestyle=":", label="cudaMemcpyAsync D2D")
    ax.axhline(data["plain_copy_GBps"], color="gray", linestyle=":", label="plain 16B copy")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("CTAs")
    ax.set_ylabel("GB/s")
    ax.set_title(f"purlin Atoms on {data['device']} ({data['bytes'] >> 20} MiB)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot: {dst}")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        data = json.load(f)
    if data.get("benchmark") == "collectives":
        plot_collectives(data, dst)
    else:
        plot_atoms(data, dst)


if __name__ == "__main__":
    main()
