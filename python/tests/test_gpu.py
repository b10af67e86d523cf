"""GPU tests of the purlin package: needs torch and a CUDA GPU, and reports
itself skipped (exit 0) without them.

Every collective x datatype x op against a torch reference, out of place and
in place (where purlin.h has an in-place form), V counts on the host and on
the device, 1, 2 and 8 ranks on GPU 0 in this process (init_all, one stream
per rank); 100 replays of one torch.cuda.graph holding all seven
collectives, with new inputs and new device counts each replay; sessions
(sm_90), eager, in a group and captured; the errors torch tensors can
provoke. Inputs are small integers, a function of (rank, index, seed), so
every sum is exact in every datatype and the check is exact; outputs are
poisoned before each run; a wrong element prints rank, index, expected and
got.

    PURLIN_LIBRARY=.gpu/libpurlin.so python3 python/tests/test_gpu.py
"""

import os
import sys
import unittest

# Before CUDA starts: two hardware queues per rank for sessions of 8 ranks
# on one GPU, and every kernel loaded up front so that no first launch
# waits for a resident megakernel (purlin.h, Sessions).
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def skip(reason):
    print("skipped: %s" % reason)
    print("SKIPPED test_gpu: %s" % reason)
    sys.exit(0)


try:
    import torch
except ImportError as e:
    skip("torch is not importable (%s)" % e)
if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
    skip("no CUDA device visible to torch")

import purlin  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
          torch.float8_e5m2, torch.int32]
OPS = ["sum", "max", "min"]
RANKS = [1, 2, 8]
SIZES = [0, 1, 7, 1023, 4097, 300007]


def values(rank, n, seed, dtype):
    """Integers in -2..2 (-1..1 for e5m2, whose 2 mantissa bits hold sums of
    8 such values exactly), a function of rank, index and seed."""
    span = 3 if dtype == torch.float8_e5m2 else 5
    i = torch.arange(n, device="cuda", dtype=torch.int64)
    v = (i * 7 + rank * 13 + seed * 5 + (i * rank) % 11) % span - span // 2
    return v.to(torch.float32).to(dtype)


def poison(t):
    fill = -7777 if t.dtype == torch.int32 else float("nan")
    t.copy_(torch.full(t.shape, fill, dtype=torch.float32, device=t.device).to(t.dtype))


def reduce_ref(xs, op, dtype):
    stack = torch.stack([x.float() for x in xs])
    r = {"sum": stack.sum(0), "max": stack.max(0).values, "min": stack.min(0).values}[op]
    return r.to(dtype)


def cat(xs):
    return torch.cat([x.float() for x in xs]) if xs else torch.empty(0, device="cuda")


class Wrong(AssertionError):
    pass


def compare(what, rank, got, expected):
    g = got.reshape(-1).float()
    e = expected.reshape(-1).float()
    if g.numel() != e.numel():
        raise Wrong("%s rank %d: %d elements, expected %d" % (what, rank, g.numel(), e.numel()))
    bad = ~((g == e) | (torch.isnan(g) & torch.isnan(e)))
    if bool(bad.any()):
        idx = int(bad.nonzero()[0])
        raise Wrong("%s rank %d: %d wrong; first at index %d: expected %r, got %r" % (
            what, rank, int(bad.sum()), idx, float(e[idx]), float(g[idx])))


class Ranks:
    """n ranks on GPU 0 with a stream each."""

    def __init__(self, n, **config):
        self.comms = purlin.init_all([0] * n, **config)
        self.streams = [torch.cuda.Stream() for _ in range(n)]
        self.n = n

    def run(self, fn):
        """fn(rank, comm, stream) for every rank, each on its stream after
        the work queued so far; then waits for all."""
        main = torch.cuda.current_stream()
        for s in self.streams:
            s.wait_stream(main)
        results = []
        for r, (c, s) in enumerate(zip(self.comms, self.streams)):
            with torch.cuda.stream(s):
                results.append(fn(r, c, s))
        for s in self.streams:
            main.wait_stream(s)
        torch.cuda.synchronize()
        return results

    def close(self):
        self.comms.destroy()


def v_counts(n, size):
    return [(size * (r + 1)) // n if r % 3 != 2 else 0 for r in range(n)]


def a2av_counts(n, size):
    return [[(size * (s + d + 1)) // (2 * n) + (s + d) % 2 for d in range(n)] for s in range(n)]


def offsets(counts):
    out, acc = [], 0
    for c in counts:
        out.append(acc)
        acc += c
    return out


class Case:
    """One collective's inputs, outputs and expected outputs on every rank."""

    def __init__(self, coll, n, size, dtype, op, inplace, device_counts, seed=0):
        self.coll, self.n, self.dtype, self.op = coll, n, dtype, op
        self.inplace, self.device_counts = inplace, device_counts
        self.label = "%s n=%d size=%d %s%s%s%s" % (
            coll, n, size, str(dtype)[6:], " " + op if op else "",
            " in-place" if inplace else "", " device-counts" if device_counts else "")
        ranks = range(n)
        self.counts = None
        if coll == "all_reduce":
            xs = [values(r, size, seed, dtype) for r in ranks]
            ref = reduce_ref(xs, op, dtype)
            self.expected = [ref] * n
            self.ins = xs
            self.outs = xs if inplace else [torch.empty_like(x) for x in xs]
        elif coll in ("all_gather", "all_gather_v"):
            counts = [size] * n if coll == "all_gather" else v_counts(n, size)
            xs = [values(r, counts[r], seed, dtype) for r in ranks]
            ref = cat(xs).to(dtype)
            self.expected = [ref] * n
            total = sum(counts)
            self.outs = [torch.empty(total, dtype=dtype, device="cuda") for _ in ranks]
            if inplace:
                off = offsets(counts)
                for r in ranks:
                    self.outs[r][off[r]:off[r] + counts[r]].copy_(xs[r])
                self.ins = [self.outs[r][off[r]:off[r] + counts[r]] for r in ranks]
            else:
                self.ins = xs
            self.counts = counts if coll == "all_gather_v" else None
        elif coll in ("reduce_scatter", "reduce_scatter_v"):
            counts = [size] * n if coll == "reduce_scatter" else v_counts(n, size)
            total, off = sum(counts), offsets(counts)
            xs = [values(r, total, seed, dtype) for r in ranks]
            ref = reduce_ref(xs, op, dtype)
            self.expected = [ref[off[r]:off[r] + counts[r]] for r in ranks]
            self.ins = xs
            if inplace:
                self.outs = [xs[r][off[r]:off[r] + counts[r]] for r in ranks]
            else:
                self.outs = [torch.empty(counts[r], dtype=dtype, device="cuda") for r in ranks]
            self.counts = counts if coll == "reduce_scatter_v" else None
        elif coll == "all_to_all":
            xs = [values(r, size * n, seed, dtype) for r in ranks]
            self.expected = [cat([xs[s][d * size:(d + 1) * size] for s in ranks]).to(dtype)
                             for d in ranks]
            self.ins = xs
            self.outs = [torch.empty_like(x) for x in xs]
        elif coll == "all_to_all_v":
            m = a2av_counts(n, size)
            xs = [values(s, sum(m[s]), seed, dtype) for s in ranks]
            send_off = [offsets(m[s]) for s in ranks]
            self.expected = [cat([xs[s][send_off[s][d]:send_off[s][d] + m[s][d]]
                                  for s in ranks]).to(dtype) for d in ranks]
            self.ins = xs
            self.outs = [torch.empty(sum(m[s][d] for s in ranks), dtype=dtype, device="cuda")
                         for d in ranks]
            self.counts = m
        # Poison what the collective writes and the input does not hold.
        for r in ranks:
            if not inplace:
                poison(self.outs[r])
        if inplace and coll in ("all_gather", "all_gather_v"):
            self._poison_gather_holes(counts if coll == "all_gather_v" else [size] * n)
        self.dev_counts = None
        if self.counts is not None and device_counts:
            flat = [c for row in self.counts for c in row] if coll == "all_to_all_v" \
                else self.counts
            self.dev_counts = torch.tensor(flat, dtype=torch.int64, device="cuda")

    def _poison_gather_holes(self, counts):
        off = offsets(counts)
        for r in range(self.n):
            for q in range(self.n):
                if q != r:
                    poison(self.outs[r][off[q]:off[q] + counts[q]])

    def call(self, r, comm, stream):
        kw = {"out": self.outs[r], "stream": stream}
        if self.op:
            kw["op"] = self.op
        fn = getattr(comm, self.coll)
        if self.counts is not None:
            counts = self.dev_counts if self.dev_counts is not None else self.counts
            return fn(self.ins[r], counts, **kw)
        return fn(self.ins[r], **kw)

    def check(self):
        for r in range(self.n):
            compare(self.label, r, self.outs[r], self.expected[r])


COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_gather_v",
               "reduce_scatter_v", "all_to_all_v"]
REDUCING = {"all_reduce", "reduce_scatter", "reduce_scatter_v"}
IN_PLACE = {"all_reduce", "all_gather", "reduce_scatter", "all_gather_v", "reduce_scatter_v"}


def cases(coll, n):
    for dtype in DTYPES:
        for op in (OPS if coll in REDUCING else [None]):
            for inplace in ([False, True] if coll in IN_PLACE else [False]):
                for dc in ([False, True] if coll.endswith("_v") else [False]):
                    for size in SIZES:
                        yield coll, n, size, dtype, op, inplace, dc


_ranks = {}


def ranks(n):
    if n not in _ranks:
        _ranks[n] = Ranks(n)
    return _ranks[n]


def capture_all(group, step):
    """One torch.cuda.graph of step(rank, comm, stream) on every rank's
    stream, forked from and joined back to one capturing stream, after an
    eager warm-up run (nothing is loaded or allocated in the capture)."""
    group.run(step)
    graph = torch.cuda.CUDAGraph()
    main = torch.cuda.Stream()
    with torch.cuda.stream(main):
        with torch.cuda.graph(graph, stream=main):
            cur = torch.cuda.current_stream()
            for s in group.streams:
                s.wait_stream(cur)
            for r, (c, s) in enumerate(zip(group.comms, group.streams)):
                with torch.cuda.stream(s):
                    step(r, c, s)
            for s in group.streams:
                cur.wait_stream(s)
    return graph


class CollectiveTest(unittest.TestCase):
    def run_all(self, coll, n):
        group, count = ranks(n), 0
        for args in cases(coll, n):
            case = Case(*args)
            torch.cuda.synchronize()
            outs = group.run(case.call)
            for r in range(n):
                self.assertEqual(outs[r].data_ptr(), case.outs[r].data_ptr())
            case.check()
            count += 1
        self.assertGreater(count, 0)


def _add(coll, n):
    def test(self):
        self.run_all(coll, n)
    setattr(CollectiveTest, "test_%s_%d_ranks" % (coll, n), test)


for _c in COLLECTIVES:
    for _n in RANKS:
        _add(_c, _n)


class GraphTest(unittest.TestCase):
    def test_100_replays_all_collectives(self):
        n, size, dtype = 8, 1000, torch.bfloat16
        group = ranks(n)
        cap = size * n  # room for the largest V blocks below
        x = [torch.zeros(cap, dtype=dtype, device="cuda") for _ in range(n)]
        outs = {c: [torch.zeros(cap * n, dtype=dtype, device="cuda") for _ in range(n)]
                for c in COLLECTIVES}
        dcounts = torch.zeros(n, dtype=torch.int64, device="cuda")
        dmatrix = torch.zeros(n * n, dtype=torch.int64, device="cuda")
        k = size // n  # the reduce_scatter / all_to_all block

        def step(r, c, s):
            c.all_reduce(x[r][:size], out=outs["all_reduce"][r][:size], stream=s)
            c.all_gather(x[r][:size], out=outs["all_gather"][r][:size * n], stream=s)
            c.reduce_scatter(x[r][:k * n], out=outs["reduce_scatter"][r][:k], op="max",
                             stream=s)
            c.all_to_all(x[r][:k * n], out=outs["all_to_all"][r][:k * n], stream=s)
            c.all_gather_v(x[r], dcounts, out=outs["all_gather_v"][r], stream=s)
            c.reduce_scatter_v(x[r], dcounts, out=outs["reduce_scatter_v"][r], stream=s)
            c.all_to_all_v(x[r], dmatrix, out=outs["all_to_all_v"][r], stream=s)

        def fill(seed):
            counts = [(seed * 7 + r * 31) % (size // n + 1) for r in range(n)]
            m = [[(seed + s * 3 + d * 5) % (size // n + 1) for d in range(n)] for s in range(n)]
            dcounts.copy_(torch.tensor(counts, dtype=torch.int64))
            dmatrix.copy_(torch.tensor([v for row in m for v in row], dtype=torch.int64))
            xs = []
            for r in range(n):
                v = values(r, cap, seed, dtype)
                x[r].copy_(v)
                xs.append(v)
            for c in COLLECTIVES:
                for o in outs[c]:
                    poison(o)
            return counts, m, xs

        fill(0)
        graph = capture_all(group, step)
        for replay in range(100):
            counts, m, xs = fill(replay + 1)
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            label = "replay %d" % replay
            ar = reduce_ref([v[:size] for v in xs], "sum", dtype)
            ag = cat([v[:size] for v in xs]).to(dtype)
            rs = reduce_ref([v[:k * n] for v in xs], "max", dtype)
            off = offsets(counts)
            agv = cat([xs[r][:counts[r]] for r in range(n)]).to(dtype)
            rsv = reduce_ref(xs, "sum", dtype)
            for r in range(n):
                compare(label + " all_reduce", r, outs["all_reduce"][r][:size], ar)
                compare(label + " all_gather", r, outs["all_gather"][r][:size * n], ag)
                compare(label + " reduce_scatter", r, outs["reduce_scatter"][r][:k],
                        rs[r * k:(r + 1) * k])
                compare(label + " all_to_all", r, outs["all_to_all"][r][:k * n],
                        cat([xs[s][r * k:(r + 1) * k] for s in range(n)]).to(dtype))
                compare(label + " all_gather_v", r, outs["all_gather_v"][r][:sum(counts)], agv)
                # The device counts say the sizes: nothing past them is written.
                self.assertTrue(bool(torch.isnan(outs["all_gather_v"][r][sum(counts):].float())
                                     .all()), label + " all_gather_v wrote past its counts")
                compare(label + " reduce_scatter_v", r, outs["reduce_scatter_v"][r][:counts[r]],
                        rsv[off[r]:off[r] + counts[r]])
                recv = [m[s][r] for s in range(n)]
                so = [offsets(m[s]) for s in range(n)]
                compare(label + " all_to_all_v", r, outs["all_to_all_v"][r][:sum(recv)],
                        cat([xs[s][so[s][r]:so[s][r] + m[s][r]] for s in range(n)]).to(dtype))


def sessions_supported():
    return torch.cuda.get_device_capability(0) == (9, 0)


class SessionTest(unittest.TestCase):
    def setUp(self):
        if not sessions_supported():
            self.skipTest("sessions run on sm_90 only (this GPU is sm_%d%d)" %
                          torch.cuda.get_device_capability(0))

    def session_cases(self, n):
        return [Case(c, n, size, torch.bfloat16, "sum" if c in REDUCING else None, False,
                     c.endswith("_v"), seed=3) for c in COLLECTIVES for size in (1, 4097)]

    def test_session_eager_and_group(self):
        for n in (2, 8):
            group = ranks(n)
            # The library's megakernel CTAs for n ranks on one GPU (0 in
            # the config): the same on every rank, and 8 or more a rank
            # where a quarter of the SMs allow it.
            mk = [c.megakernel_ctas for c in group.comms]
            self.assertEqual(len(set(mk)), 1, mk)
            self.assertTrue(1 <= mk[0] <= 32, mk)
            for use_group in (False, True):
                cs = self.session_cases(n)
                torch.cuda.synchronize()

                def body(r, c, s):
                    for case in cs:
                        case.call(r, c, s)

                main = torch.cuda.current_stream()
                for s in group.streams:
                    s.wait_stream(main)
                begun = []
                try:
                    for c, s in zip(group.comms, group.streams):
                        c.session_begin(s)
                        begun.append((c, s))
                    if use_group:
                        with purlin.group():
                            for r, (c, s) in enumerate(zip(group.comms, group.streams)):
                                body(r, c, s)
                    else:
                        for r, (c, s) in enumerate(zip(group.comms, group.streams)):
                            body(r, c, s)
                finally:
                    # Ended whatever happened, so that the group can be
                    # destroyed and the next test starts clean.
                    for c, s in begun:
                        c.session_end(s)
                torch.cuda.synchronize()
                for case in cs:
                    case.check()
                for c in group.comms:
                    self.assertIsNone(c.get_async_error())

    def test_session_captured_and_replayed(self):
        n = 8
        group = ranks(n)
        x = [torch.zeros(4097, dtype=torch.bfloat16, device="cuda") for _ in range(n)]
        y = [torch.zeros_like(v) for v in x]
        # Warm-up: the first session allocates its resources (not capturable).
        for c, s in zip(group.comms, group.streams):
            with c.session(stream=s):
                pass
        torch.cuda.synchronize()
        graph, main = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        with torch.cuda.stream(main):
            with torch.cuda.graph(graph, stream=main):
                cur = torch.cuda.current_stream()
                for s in group.streams:
                    s.wait_stream(cur)
                for c, s in zip(group.comms, group.streams):
                    c.session_begin(s)
                for r, (c, s) in enumerate(zip(group.comms, group.streams)):
                    c.all_reduce(x[r], out=y[r], stream=s)
                    c.all_reduce(y[r], out=y[r], op="max", stream=s)
                for c, s in zip(group.comms, group.streams):
                    c.session_end(s)
                for s in group.streams:
                    cur.wait_stream(s)
        for replay in range(20):
            xs = [values(r, 4097, replay, torch.bfloat16) for r in range(n)]
            for r in range(n):
                x[r].copy_(xs[r])
                poison(y[r])
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            ref = reduce_ref(xs, "sum", torch.bfloat16)
            for r in range(n):
                compare("session replay %d" % replay, r, y[r], ref)


class FusedTest(unittest.TestCase):
    """all_reduce_residual_rmsnorm against torch: residual_out exactly (the
    sum over ranks in rank order in fp32, as purlin reduces, plus the
    residual, rounded), out and out_fp8 within a rounding (torch sums the
    squares in another order), eager, in place and captured in a graph."""

    def reference(self, xs, res, w, eps):
        a = xs[0].float()
        for x in xs[1:]:
            a = a + x.float()
        h = (a.to(xs[0].dtype).float() + res.float()).to(xs[0].dtype)
        hf = h.float()
        y = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        return h, y

    def check(self, label, h, y, out, rout, q=None, scale=1.0):
        self.assertTrue(torch.equal(rout, h), "%s: residual_out differs" % label)
        tol = 2.0 ** -7 if out.dtype == torch.bfloat16 else 2.0 ** -10
        torch.testing.assert_close(out.float(), y.to(out.dtype).float(), rtol=2 * tol,
                                   atol=1e-3, msg=lambda m: "%s: out: %s" % (label, m))
        if q is not None:
            torch.testing.assert_close(q.float(), (y * scale).to(torch.float8_e4m3fn).float(),
                                       rtol=0.13, atol=2.0 ** -9,
                                       msg=lambda m: "%s: out_fp8: %s" % (label, m))

    def test_fused_against_torch(self):
        eps = 1e-5
        for n in (2, 8):
            rk = ranks(n)
            for dtype in (torch.bfloat16, torch.float16):
                for rows, hidden in ((1, 4096), (5, 1000), (64, 2048)):
                    label = "%d ranks %s %dx%d" % (n, dtype, rows, hidden)
                    xs = [values(r, rows * hidden, 3, dtype).reshape(rows, hidden) * 0.5
                          for r in range(n)]
                    res = [values(r + 9, rows * hidden, 5, dtype).reshape(rows, hidden)
                           for r in range(n)]
                    w = [values(r + 4, hidden, 7, dtype) * 0.25 + 1 for r in range(n)]
                    refs = [self.reference(xs, res[r], w[r], eps) for r in range(n)]
                    got = rk.run(lambda r, c, s: c.all_reduce_residual_rmsnorm(
                        xs[r], res[r], w[r], eps))
                    for r in range(n):
                        self.check(label + " rank %d" % r, *refs[r], *got[r])
                    # In place, with fp8.
                    xi = [x.clone() for x in xs]
                    ri = [t.clone() for t in res]
                    qs = [torch.empty(rows, hidden, dtype=torch.float8_e4m3fn, device="cuda")
                          for _ in range(n)]
                    rk.run(lambda r, c, s: c.all_reduce_residual_rmsnorm(
                        xi[r], ri[r], w[r], eps, out=xi[r], residual_out=ri[r], out_fp8=qs[r],
                        scale=4.0))
                    for r in range(n):
                        self.check(label + " in place rank %d" % r, *refs[r], xi[r], ri[r],
                                   qs[r], 4.0)

    def test_fused_graph_replays(self):
        n, rows, hidden, eps = 8, 4, 4096, 1e-6
        rk = ranks(n)
        xs = [torch.zeros(rows, hidden, dtype=torch.bfloat16, device="cuda") for _ in range(n)]
        res = [torch.zeros_like(x) for x in xs]
        w = [values(r, hidden, 1, torch.bfloat16) * 0.25 + 1 for r in range(n)]
        outs = [torch.empty_like(x) for x in xs]
        routs = [torch.empty_like(x) for x in xs]
        def step(r, c, s):
            c.all_reduce_residual_rmsnorm(xs[r], res[r], w[r], eps, out=outs[r],
                                          residual_out=routs[r], stream=s)

        graph = capture_all(rk, step)
        for rep in range(10):
            for r in range(n):
                xs[r].copy_(values(r, rows * hidden, rep, torch.bfloat16).reshape(rows, hidden))
                res[r].copy_(values(r + 3, rows * hidden, rep, torch.bfloat16)
                             .reshape(rows, hidden))
            torch.cuda.synchronize()
            graph.replay()
            torch.cuda.synchronize()
            for r in range(n):
                h, y = self.reference(xs, res[r], w[r], eps)
                self.check("replay %d rank %d" % (rep, r), h, y, outs[r], routs[r])


class TorchApiTest(unittest.TestCase):
    def test_defaults_allocate_on_the_current_stream(self):
        (comm,) = ranks(1).comms
        x = values(0, 12, 1, torch.bfloat16).reshape(4, 3)
        y = comm.all_reduce(x)
        torch.cuda.synchronize()
        self.assertEqual((y.shape, y.dtype, y.device.index), (x.shape, x.dtype, 0))
        compare("default all_reduce", 0, y, x)
        g = comm.all_gather(x)
        self.assertEqual(g.shape, (4, 3))
        rs = comm.reduce_scatter(x, op=purlin.MAX)
        self.assertEqual(rs.shape, (4, 3))
        v = comm.all_gather_v(x.reshape(-1), [12])
        rsv = comm.reduce_scatter_v(x.reshape(-1), torch.tensor([12]))  # a CPU tensor: host
        a = comm.all_to_all_v(x.reshape(-1), [[12]])
        torch.cuda.synchronize()
        for t in (g, rs, v, rsv, a):
            compare("defaults", 0, t, x)

    def test_torch_argument_errors(self):
        (comm,) = ranks(1).comms
        x = torch.zeros(4, 4, device="cuda")
        cases = [
            (lambda: comm.all_reduce(x.t()), purlin.InvalidArgumentError, "contiguous"),
            (lambda: comm.all_reduce(x.cpu()), purlin.InvalidArgumentError, "host memory"),
            (lambda: comm.all_reduce(x.double()), purlin.InvalidArgumentError, "float64"),
            (lambda: comm.all_reduce(x, out=torch.zeros(5, device="cuda")),
             purlin.InvalidArgumentError, "expected 16"),
            (lambda: comm.all_reduce(x, out=x.half()), purlin.InvalidArgumentError, "must match"),
            (lambda: comm.all_gather_v(x, torch.tensor([16], device="cuda", dtype=torch.int32),
                                       out=x), purlin.InvalidArgumentError, "int64"),
            (lambda: comm.all_reduce(x, out=x[:, :2].reshape(-1)[1:8]),
             purlin.InvalidArgumentError, "expected 16"),
        ]
        if torch.cuda.device_count() > 1:
            cases.append((lambda: comm.all_reduce(x, out=torch.zeros(16, device="cuda:1")),
                          purlin.InvalidArgumentError, "cuda:1"))
        for call, cls, text in cases:
            with self.assertRaises(cls) as cm:
                call()
            self.assertIn(text, cm.exception.message)
        # The library's own checks: a misaligned buffer (torch makes none,
        # so a __cuda_array_interface__ object points 2 bytes in), an overlap.
        raw = torch.zeros(64, dtype=torch.float32, device="cuda")

        class Misaligned:
            device = 0
            __cuda_array_interface__ = {"shape": (16,), "typestr": "<f4", "version": 3,
                                        "data": (raw.data_ptr() + 2, False), "strides": None}
        with self.assertRaises(purlin.InvalidArgumentError) as cm:
            comm.all_reduce(Misaligned(), out=raw[32:48])
        self.assertIn("not aligned", cm.exception.message)
        with self.assertRaises(purlin.InvalidUsageError) as cm:
            comm.all_reduce(raw[:16], out=raw[8:24])
        self.assertIn("overlap", cm.exception.message)

    def test_mismatch_is_reported_asynchronously(self):
        with purlin.init_all([0, 0], timeout_ms=3000) as comms:
            s = [torch.cuda.Stream() for _ in comms]
            a = torch.zeros(10, device="cuda")
            b = torch.zeros(20, device="cuda")
            with torch.cuda.stream(s[0]):
                comms[0].all_reduce(a, out=a, stream=s[0])
            with torch.cuda.stream(s[1]):
                comms[1].all_reduce(b, out=b, stream=s[1])
            torch.cuda.synchronize()
            err = comms[0].get_async_error() or comms[1].get_async_error()
            self.assertIsInstance(err, purlin.InvalidUsageError)
            with self.assertRaises(purlin.AbortedError):
                comms[0].all_reduce(a, out=a, stream=s[0])

    def test_abort_reaches_the_peer(self):
        comms = purlin.init_all([0, 0])
        comms[0].abort()
        err = comms[1].get_async_error()
        self.assertIsInstance(err, purlin.RemoteError)
        comms[1].destroy()

    def test_symmetric_buffers(self):
        n = 2
        with purlin.init_all([0] * n) as comms:
            streams = [torch.cuda.Stream() for _ in comms]
            count = (1 << 18) + 3  # 1 MiB + 12 B per rank: the throughput path
            xs = [comm.empty_symmetric((count,), torch.float32) for comm in comms]
            outs = [comm.empty_symmetric((n, count), torch.float32) for comm in comms]
            for r, x in enumerate(xs):
                x.copy_(values(r, count, 7, torch.float32))
                outs[r].fill_(-1.0)
            torch.cuda.synchronize()
            for r, comm in enumerate(comms):
                with torch.cuda.stream(streams[r]):
                    comm.all_gather(xs[r], out=outs[r], stream=streams[r])
            torch.cuda.synchronize()
            want = torch.stack(xs)
            for r in range(n):
                compare("all_gather on symmetric buffers", r, outs[r], want)
            # Freed with their tensors; 200 cycles leave device memory as it was.
            del xs, outs
            torch.cuda.synchronize()
            before = torch.cuda.mem_get_info(0)[0]
            for _ in range(200):
                b = comms[0].mem_alloc(3 << 20)
                b.free()
                b.free()  # twice: nothing
            t = comms[1].empty_symmetric((1000,), torch.float16)
            del t
            self.assertEqual(torch.cuda.mem_get_info(0)[0], before)
            kept = comms[0].mem_alloc(1 << 20)
        # Released with its communicator; free() after that does nothing.
        kept.free()

    def test_unique_id_through_bytes(self):
        uid = purlin.get_unique_id()
        t = torch.frombuffer(bytearray(uid), dtype=torch.uint8)
        with purlin.init_rank(1, 0, t, device=0) as comm:
            self.assertEqual((comm.rank, comm.nranks, comm.device), (0, 1, 0))
            x = torch.ones(5, device="cuda")
            comm.all_reduce(x, out=x)
            torch.cuda.synchronize()
            compare("init_rank", 0, x, torch.ones(5, device="cuda"))


def main():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    for group in _ranks.values():
        group.close()
    failed = len(result.failures) + len(result.errors)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    print("test_gpu: %d passed, %d failed, %d skipped (library %s, %s)" % (
        passed, failed, skipped, purlin.library_path(), torch.cuda.get_device_name(0)))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
