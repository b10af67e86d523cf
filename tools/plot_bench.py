#!/usr/bin/env python3
"""Plots bench/atoms JSON (bandwidth against CTA count per Atom, with the
cudaMemcpyAsync and plain-copy baselines) to a PNG.

usage: tools/plot_bench.py atoms.json atoms.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        data = json.load(f)
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


if __name__ == "__main__":
    main()
