"""purlin from PyTorch in a few lines: an AllReduce and an AllGather, checked.

One process per GPU, under torchrun (ranks meet through the launcher's
environment; nothing to share by hand):

    torchrun --nproc-per-node 8 python/examples/quickstart.py

or with the id made by rank 0 and sent through torch.distributed, as an
engine that already has a process group would do:

    torchrun --nproc-per-node 8 python/examples/quickstart.py --id-via-torch-distributed

Several ranks in this one process, all on GPU 0 (each on its own stream):

    python3 python/examples/quickstart.py --ranks 8

The library is found next to the package or through PURLIN_LIBRARY.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import purlin  # noqa: E402


def make_input(comm, stream):
    """Every rank contributes rank + 1."""
    with torch.cuda.stream(stream):
        return torch.full((1024,), float(comm.rank + 1), device="cuda:%d" % comm.device)


def one_rank(comm, stream, x):
    """The collectives of one rank; returns its outputs."""
    with torch.cuda.stream(stream):
        total = comm.all_reduce(x, stream=stream)          # out of place, allocated
        comm.all_reduce(x, out=x, op=purlin.MAX, stream=stream)  # in place
        gathered = comm.all_gather(x[:4], stream=stream)   # 4 per rank
    return total, x, gathered


def check(comm, total, x, gathered):
    n = comm.nranks
    assert torch.all(total == n * (n + 1) / 2), total[:4]
    assert torch.all(x == n), x[:4]
    assert torch.all(gathered == n) and gathered.numel() == 4 * n, gathered


def per_process(args):
    if args.id_via_torch_distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, size = dist.get_rank(), dist.get_world_size()
        box = [purlin.get_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        local = int(os.environ.get("LOCAL_RANK", rank))
        comm = purlin.init_rank(size, rank, box[0], device=local)
    else:
        comm = purlin.init_rank_from_env()
    with comm:
        torch.cuda.set_device(comm.device)
        stream = torch.cuda.current_stream()
        total, x, gathered = one_rank(comm, stream, make_input(comm, stream))
        torch.cuda.synchronize()
        check(comm, total, x, gathered)
        print("rank %d of %d on cuda:%d: all_reduce sum %.0f, max %.0f, all_gather %s" % (
            comm.rank, comm.nranks, comm.device, total[0].item(), x[0].item(),
            gathered[::4].tolist()))


def in_process(args):
    with purlin.init_all([args.device] * args.ranks) as comms:
        streams = [torch.cuda.Stream(device=args.device) for _ in comms]
        # Issued one rank after another from this thread; each rank's kernel
        # waits on the device for its peers, so each needs its own stream.
        # The inputs are made first: a kernel that CUDA loads at its first
        # launch (torch's fill, here) waits for the kernels resident then,
        # and a peer's collective waiting for this rank would be one
        # (README: several ranks on one GPU).
        xs = [make_input(c, s) for c, s in zip(comms, streams)]
        torch.cuda.synchronize()
        results = [one_rank(c, s, x) for c, s, x in zip(comms, streams, xs)]
        torch.cuda.synchronize()
        for c, (total, x, gathered) in zip(comms, results):
            check(c, total, x, gathered)
        print("%d ranks on cuda:%d: all_reduce sum %.0f, max %.0f, all_gather ok" % (
            args.ranks, args.device, results[0][0][0].item(), results[0][1][0].item()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=0,
                   help="run this many ranks in this process (init_all) instead of one "
                        "rank per process")
    p.add_argument("--device", type=int, default=0, help="the GPU of --ranks")
    p.add_argument("--id-via-torch-distributed", action="store_true",
                   help="rank 0 makes the id and broadcasts it (purlin.init_rank)")
    args = p.parse_args()
    print("purlin %d from %s" % (purlin.version(), purlin.library_path()))
    if args.ranks:
        in_process(args)
    else:
        per_process(args)


if __name__ == "__main__":
    main()
