"""A small tensor-parallel transformer decoder on purlin, captured in one CUDA graph.

Random weights made here (one seed, so every process makes the same ones);
each rank holds its attention heads and its slice of the MLP (Megatron
layout: QKV and W1/W3 split by columns, O and W2 by rows), a real KV cache
for its heads, and two AllReduces per layer join the partial outputs. One
decode step -- embed the token, every layer, final norm, advance the
position -- is captured once in a torch.cuda.graph and replayed per token;
the position lives on the device, so the replayed graph attends over a
growing cache with a mask. Checked against the same model run unsharded on
one rank, and timed per token in three modes:

  eager    the step issued from Python, purlin AllReduces as kernels
  graph    the captured step replayed
  session  the captured step inside a purlin session: the AllReduces are
           descriptors run by the resident megakernel (sm_90 only)

Check: the largest |sharded - unsharded| over all steps and outputs is
printed and must be within TOLERANCE[dtype] x max|unsharded|. The two runs
differ only in rounding: the sharded O and W2 products are summed over
ranks after each partial product was rounded to the datatype, the unsharded
ones are a single product. bf16 carries 8 bits (2^-8 relative per rounding),
so a few roundings through the layers stay well under 2^-4 of the output's
magnitude; fp16 (11 bits) under 2^-7; fp32 under 1e-4. Eager, graph and
session runs of the sharded model must agree bit for bit (purlin's
reductions are deterministic).

    python3 python/examples/tp_decode.py --ranks 8          # 8 ranks on GPU 0
    torchrun --nproc-per-node 8 python/examples/tp_decode.py
"""

import argparse
import math
import os
import sys

# Before CUDA starts: sessions of several ranks on one GPU need two
# hardware queues per rank, and every kernel must be loaded before a
# megakernel is resident (see README, Sessions).
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import purlin  # noqa: E402

TOLERANCE = {torch.float32: 1e-4, torch.float16: 2.0 ** -7, torch.bfloat16: 2.0 ** -4}


class Weights:
    """The whole model's weights, made on `device` from one seed."""

    def __init__(self, a, dtype, device):
        g = torch.Generator(device=device)
        g.manual_seed(a.seed)
        d, f, h, hd, v = a.hidden, a.ffn, a.heads, a.hidden // a.heads, a.vocab

        def rand(*shape, fan_in):
            return (torch.randn(*shape, generator=g, device=device) / math.sqrt(fan_in)).to(dtype)

        self.embed = (torch.randn(v, d, generator=g, device=device)).to(dtype)
        self.layers = []
        for _ in range(a.layers):
            self.layers.append({
                "norm1": (1 + 0.1 * torch.randn(d, generator=g, device=device)).to(dtype),
                "wq": rand(d, h * hd, fan_in=d), "wk": rand(d, h * hd, fan_in=d),
                "wv": rand(d, h * hd, fan_in=d), "wo": rand(h * hd, d, fan_in=h * hd),
                "norm2": (1 + 0.1 * torch.randn(d, generator=g, device=device)).to(dtype),
                "w1": rand(d, f, fan_in=d), "w3": rand(d, f, fan_in=d),
                "w2": rand(f, d, fan_in=f),
            })
        self.norm = (1 + 0.1 * torch.randn(d, generator=g, device=device)).to(dtype)


class Shard:
    """Rank r of n: heads [r*h/n, (r+1)*h/n), MLP columns likewise; its KV
    cache, position and output buffers. n == 1 is the unsharded model."""

    def __init__(self, w, a, r, n, dtype, device):
        h, hd = a.heads, a.hidden // a.heads
        hl, fl = h // n, a.ffn // n
        cols = slice(r * hl * hd, (r + 1) * hl * hd)
        fcols = slice(r * fl, (r + 1) * fl)
        self.hl, self.hd = hl, hd
        self.embed, self.norm = w.embed, w.norm
        self.layers = []
        for L in w.layers:
            self.layers.append({
                "norm1": L["norm1"], "norm2": L["norm2"],
                # One (d, 3 * hl * hd) matrix: q, k, v of this rank's heads.
                "wqkv": torch.cat([L["wq"][:, cols], L["wk"][:, cols], L["wv"][:, cols]],
                                  1).contiguous(),
                "wo": L["wo"][cols, :].contiguous(),
                "w13": torch.cat([L["w1"][:, fcols], L["w3"][:, fcols]], 1).contiguous(),
                "w2": L["w2"][fcols, :].contiguous(),
            })
        b, t = a.batch, a.max_len
        self.k = [torch.zeros(b, hl, t, hd, dtype=dtype, device=device) for _ in w.layers]
        self.v = [torch.zeros(b, hl, t, hd, dtype=dtype, device=device) for _ in w.layers]
        self.pos = torch.zeros(1, dtype=torch.int64, device=device)
        self.out = torch.zeros(b, a.hidden, dtype=dtype, device=device)
        self.steps = torch.arange(t, device=device)

    def reset(self):
        for c in self.k + self.v:
            c.zero_()
        self.pos.zero_()


def rmsnorm(x, g):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * g


def decode_step(s, tokens, allreduce):
    """One token for every sequence of the batch: reads tokens[pos], writes
    s.out, advances s.pos. allreduce(t) sums t over ranks in place."""
    tok = tokens.index_select(0, s.pos).reshape(-1)  # (batch,)
    x = s.embed.index_select(0, tok)                  # (batch, hidden)
    b = x.shape[0]
    mask = (s.steps > s.pos).reshape(1, 1, -1)        # future positions
    for i, L in enumerate(s.layers):
        qkv = rmsnorm(x, L["norm1"]) @ L["wqkv"]
        q, k, v = qkv.view(b, 3, s.hl, s.hd).unbind(1)
        s.k[i].index_copy_(2, s.pos, k.unsqueeze(2))
        s.v[i].index_copy_(2, s.pos, v.unsqueeze(2))
        scores = torch.einsum("bhd,bhtd->bht", q.float(), s.k[i].float()) / math.sqrt(s.hd)
        p = torch.softmax(scores.masked_fill(mask, float("-inf")), -1).to(x.dtype)
        o = torch.einsum("bht,bhtd->bhd", p, s.v[i]).reshape(b, s.hl * s.hd)
        attn = o @ L["wo"]
        allreduce(attn)
        x = x + attn
        u = rmsnorm(x, L["norm2"]) @ L["w13"]
        g, up = u.chunk(2, -1)
        m = (torch.nn.functional.silu(g) * up) @ L["w2"]
        allreduce(m)
        x = x + m
    s.out.copy_(rmsnorm(x, s.norm))
    s.pos.add_(1)


class Model:
    """The ranks this process drives (all n with --ranks, else its own)."""

    def __init__(self, a, comms, device):
        self.a, self.comms, self.device = a, comms, device
        self.dtype = getattr(torch, a.dtype)
        w = Weights(a, self.dtype, device)
        n = comms[0].nranks
        self.shards = [Shard(w, a, c.rank, n, self.dtype, device) for c in comms]
        self.reference = Shard(w, a, 0, 1, self.dtype, device)
        g = torch.Generator(device=device)
        g.manual_seed(a.seed + 1)
        # Teacher-forced tokens: the same inputs for every mode and the reference.
        self.tokens = torch.randint(0, a.vocab, (a.max_len, a.batch), generator=g,
                                    device=device)
        self.streams = [torch.cuda.Stream(device=device) for _ in comms]

    def step(self):
        """One decode step of every local rank, each on its stream, joined
        back into the current stream (so it can be captured)."""
        cur = torch.cuda.current_stream()
        for s in self.streams:
            s.wait_stream(cur)
        for comm, shard, stream in zip(self.comms, self.shards, self.streams):
            with torch.cuda.stream(stream):
                decode_step(shard, self.tokens,
                            lambda t, c=comm, st=stream: c.all_reduce(t, out=t, stream=st))
        for s in self.streams:
            cur.wait_stream(s)

    def reset(self):
        for s in self.shards:
            s.reset()

    def warm(self):
        """Every rank's step once without its AllReduces, ranks one after
        another: every kernel torch and cuBLAS load at their first launch is
        loaded before any collective is resident. With several ranks on one
        GPU a kernel loaded later would wait for the resident collectives of
        the other ranks, which wait for this rank (README: several ranks on
        one GPU)."""
        for shard, stream in zip(self.shards, self.streams):
            with torch.cuda.stream(stream):
                decode_step(shard, self.tokens, lambda t: None)
            torch.cuda.synchronize()
        self.reset()

    def run(self, steps, fn):
        """Runs `steps` tokens through fn; returns each step's outputs."""
        self.reset()
        outs = []
        for _ in range(steps):
            fn()
            outs.append([s.out.clone() for s in self.shards])
        torch.cuda.synchronize()
        return outs

    def capture(self, session):
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream(device=self.device)
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                if session:
                    cur = torch.cuda.current_stream()
                    for s in self.streams:
                        s.wait_stream(cur)
                    for c, s in zip(self.comms, self.streams):
                        c.session_begin(s)
                    self.step()
                    for c, s in zip(self.comms, self.streams):
                        c.session_end(s)
                    for s in self.streams:
                        cur.wait_stream(s)
                else:
                    self.step()
        return graph


def time_per_token(model, fn, tokens):
    """Median over 5 runs of `tokens` steps each, in microseconds per token."""
    runs = []
    for _ in range(5):
        model.reset()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(tokens):
            fn()
        end.record()
        torch.cuda.synchronize()
        runs.append(start.elapsed_time(end) * 1000.0 / tokens)
    runs.sort()
    return runs[len(runs) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=0,
                   help="ranks in this process (init_all on --device); default: one rank "
                        "per process (torchrun)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=4096)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--max-len", type=int, default=128, help="KV cache length (tokens)")
    p.add_argument("--steps", type=int, default=32, help="decode steps checked")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()

    if a.ranks:
        comms = purlin.init_all([a.device] * a.ranks)
    else:
        comms = [purlin.init_rank_from_env()]
    device = torch.device("cuda", comms[0].device)
    torch.cuda.set_device(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    n, lead = comms[0].nranks, comms[0].rank == 0
    assert a.heads % n == 0 and a.ffn % n == 0, "heads and ffn must divide by the ranks"
    assert a.steps <= a.max_len

    model = Model(a, comms, device)
    dtype = model.dtype

    # Reference: the unsharded model, eager, on this GPU.
    model_ref = model.reference
    model_ref.reset()
    ref = []
    for _ in range(a.steps):
        decode_step(model_ref, model.tokens, lambda t: None)
        ref.append(model_ref.out.clone())
    torch.cuda.synchronize()

    model.warm()
    # Eager with several ranks in this process: one thread issues every
    # rank's kernels, each collective waiting on the GPU for its peers'
    # while the host is still issuing them; on one H200 this hung (a rank's
    # work never ran while its peers' collectives were resident: shared
    # hardware queues or a blocking host call). One rank per process, or a
    # graph, has no such hazard; the graph's outputs are then checked
    # against the reference directly.
    eager_note = ""
    if len(comms) > 1:
        eager_note = "not run: %d ranks driven by one thread (README: several ranks on one GPU)" % (
            len(comms))
    graph = model.capture(session=False)
    graphed = model.run(a.steps, graph.replay)
    eager = model.run(a.steps, model.step) if not eager_note else graphed

    cc = torch.cuda.get_device_capability(device)
    session_note, sessioned, sgraph = "", None, None
    try:
        # An eager session first: it allocates the session resources, which
        # a capture could not.
        for c, s in zip(comms, model.streams):
            with c.session(stream=s):
                pass
        torch.cuda.synchronize()
        sgraph = model.capture(session=True)
        sessioned = model.run(a.steps, sgraph.replay)
    except purlin.InvalidUsageError as e:
        session_note = "unavailable on sm_%d%d: %s" % (cc[0], cc[1], e.message)

    scale = max(float(r.float().abs().max()) for r in ref)
    err = max(float((o.float() - r.float()).abs().max()) for outs, r in zip(eager, ref)
              for o in outs)
    ok = err <= TOLERANCE[dtype] * scale
    same = all(torch.equal(x, y) for e, g in zip(eager, graphed) for x, y in zip(e, g))
    if sessioned is not None:
        same = same and all(torch.equal(x, y) for e, s in zip(eager, sessioned)
                            for x, y in zip(e, s))
    ranks_equal = all(torch.equal(outs[0], o) for outs in eager for o in outs)

    t_eager = time_per_token(model, model.step, a.steps) if not eager_note else None
    t_graph = time_per_token(model, graph.replay, a.steps)
    t_session = time_per_token(model, sgraph.replay, a.steps) if sgraph is not None else None

    if lead:
        print("tp_decode: %d ranks%s, %d layers, hidden %d, %d heads, ffn %d, batch %d, %s, "
              "%d steps" % (n, " on %s" % device if a.ranks else " (one per process)",
                            a.layers, a.hidden, a.heads, a.ffn, a.batch, a.dtype, a.steps))
        print("max |sharded - unsharded| = %.3g (max |unsharded| %.3g, tolerance %.3g): %s" % (
            err, scale, TOLERANCE[dtype] * scale, "ok" if ok else "TOO LARGE"))
        print("%sgraph%s outputs bit-identical: %s; all ranks equal: %s" % (
            "" if eager_note else "eager, ", ", session" if sessioned is not None else "", same,
            ranks_equal))
        print()
        print("| mode | us/token |")
        print("|---|---|")
        print("| eager purlin | %s |" % ("%.1f" % t_eager if t_eager is not None else eager_note))
        print("| graph-captured purlin | %.1f |" % t_graph)
        print("| session (graph-captured) | %s |" % (
            "%.1f" % t_session if t_session is not None else session_note))
    for c in comms:
        c.destroy()
    if not (ok and same and ranks_equal):
        sys.exit(1)


if __name__ == "__main__":
    main()
