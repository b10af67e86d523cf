#!/usr/bin/env python3
"""Plots benchmark JSON to a PNG. Which benchmark wrote the file is told by
its top-level "benchmark" key when present:

- "collectives" (bench/collectives): time against size, log-log, one
  subplot per collective, one line per path (auto, latency, throughput),
  with the barrier-only floor on the AllReduce subplot.
- "nccl_compare" (bench/nccl_compare): time against size, log-log, one
  subplot per collective, one line per library and mode (purlin and NCCL,
  eager and CUDA graph); cells not measured or failed are left out.
- "fused" (bench/fused): time per call against tokens, one subplot per
  hidden size, one line per mode (AllReduce alone, unfused, fused).
- "symmetric" (bench/symmetric): bandwidth against size, one subplot per
  collective, one line per buffer kind (staged, direct, symmetric).
- no key and an "atoms" key (bench/atoms): bandwidth against CTA count per
  Atom, with the cudaMemcpyAsync and plain-copy baselines.

Anything else is refused with a message and exit status 1.

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
NCCL_COMPARE_STYLES = (
    ("purlin", "eager", "purlin eager", "C0", "o", "--"),
    ("purlin", "graph", "purlin graph", "C0", "o", "-"),
    ("nccl", "eager", "NCCL eager", "C3", "s", "--"),
    ("nccl", "graph", "NCCL graph", "C3", "s", "-"),
)
PATH_STYLES = (
    ("auto", "auto (tuned)", "C0", "o", "-"),
    ("latency", "latency (forced)", "C1", "s", "--"),
    ("throughput", "throughput (forced)", "C2", "^", "--"),
)


def time_axes(ax, coll):
    """Log-log time-per-call axes of one collective's subplot."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("size (B)")
    ax.set_ylabel("time per call (us)")
    ax.set_title(COLLECTIVE_TITLES.get(coll, coll))
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_lines():
        ax.legend(fontsize=7)


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
        time_axes(ax, coll)
    for j in range(len(colls), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    m = data.get("machine", {})
    fig.suptitle(f"purlin collectives: {m.get('nranks', '?')} ranks on {m.get('gpu', '?')}"
                 f"{' (one GPU)' if m.get('one_gpu') else ''}, {data.get('dtype', '?')} "
                 f"{data.get('op', '')}")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot: {dst}")


def nccl_compare_title(data):
    """Suptitle from whichever machine fields nccl_compare wrote."""
    m = data.get("machine", {})
    names = m.get("gpus") or []
    gpus = ", ".join(f"{names.count(n)}x {n}" for n in dict.fromkeys(names)) or "?"
    title = f"purlin vs NCCL: {m.get('nranks', '?')} ranks on {gpus}"
    if m.get("purlin_version"):
        title += f", purlin {m['purlin_version']}"
    title += f", NCCL {m.get('nccl_version') or 'not loaded'}"
    title += f", {data.get('dtype', '?')} {data.get('op', '')}".rstrip()
    if m.get("nccl_note"):
        title += f"\n{m['nccl_note']}"
    return title


def plot_nccl_compare(data, dst):
    """Time per call against size for each collective, library and mode."""
    rows = data.get("rows", [])
    colls = []
    for row in rows:
        if row.get("collective") not in colls:
            colls.append(row.get("collective"))
    if not colls:
        print(f"no rows in the nccl_compare JSON; no plot written to {dst}")
        return
    ncols = min(len(colls), 4)
    nrows = (len(colls) + ncols - 1) // ncols
    # At least 8 in wide so that the suptitle fits over a single subplot.
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(4.6 * ncols, 8), 3.8 * nrows),
                             squeeze=False)
    for i, coll in enumerate(colls):
        ax = axes[i // ncols][i % ncols]
        for lib, mode, label, color, marker, style in NCCL_COMPARE_STYLES:
            pts = []
            for r in rows:
                cell = (r.get(lib) or {}).get(mode) or {}
                if (r.get("collective") == coll and cell.get("status") == "ok"
                        and cell.get("time_us")):
                    pts.append((r["size"], cell["time_us"]))
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, color=color, marker=marker, markersize=3, linestyle=style,
                        label=label)
        time_axes(ax, coll)
    for j in range(len(colls), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    fig.suptitle(nccl_compare_title(data))
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot: {dst}")


def plot_fused(data, dst):
    """Time per call against tokens for each hidden size and mode."""
    rows = data.get("rows", [])
    hiddens = sorted({r["hidden"] for r in rows})
    if not hiddens:
        print(f"no rows in the fused JSON; no plot written to {dst}")
        return
    fig, axes = plt.subplots(1, len(hiddens), figsize=(5 * len(hiddens), 4), squeeze=False)
    for ax, hidden in zip(axes[0], hiddens):
        pts = [r for r in rows if r["hidden"] == hidden]
        for mode, label in (("allreduce", "AllReduce alone"), ("unfused", "AllReduce + epilogue"),
                            ("fused", "fused")):
            ax.plot([r["tokens"] for r in pts], [r[f"{mode}_us"] for r in pts], marker="o",
                    markersize=3, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens")
        ax.set_ylabel("us per call")
        ax.set_title(f"hidden {hidden}")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"AllReduce + residual + RMSNorm, bf16, {data.get('ranks', '?')} ranks on "
                 f"{data.get('gpu', '?')}")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot: {dst}")


def plot_symmetric(data, dst):
    """Bandwidth against size for each collective and buffer kind."""
    rows = data.get("rows", [])
    colls = []
    for r in rows:
        if r["coll"] not in colls:
            colls.append(r["coll"])
    if not colls:
        print(f"no rows in the symmetric JSON; no plot written to {dst}")
        return
    fig, axes = plt.subplots(1, len(colls), figsize=(4.5 * len(colls), 4), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        pts = [r for r in rows if r["coll"] == coll]
        for mode in ("staged", "direct", "symmetric"):
            ax.plot([r["bytes"] for r in pts], [r["bytes"] / r[f"{mode}_us"] / 1e3 for r in pts],
                    marker="o", markersize=3, label=mode)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes (largest buffer per rank)")
        ax.set_ylabel("GB/s")
        ax.set_title(coll)
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"symmetric buffers, {data.get('ranks', '?')} ranks on {data.get('gpu', '?')}")
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
    kind = data.get("benchmark")
    if kind == "collectives":
        plot_collectives(data, dst)
    elif kind == "nccl_compare":
        plot_nccl_compare(data, dst)
    elif kind == "fused":
        plot_fused(data, dst)
    elif kind == "symmetric":
        plot_symmetric(data, dst)
    elif kind is None and "atoms" in data:
        plot_atoms(data, dst)
    else:
        what = f'"benchmark": "{kind}"' if kind is not None else 'no "benchmark" or "atoms" key'
        sys.exit(f"plot_bench: {src}: {what}: not a collectives, nccl_compare, fused, symmetric or atoms "
                 f"JSON; no plot written")


if __name__ == "__main__":
    main()
