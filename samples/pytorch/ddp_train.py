#!/usr/bin/env python3
"""A small PyTorch DDP training job to wrap with rankscope.

    rankscope profile --pytorch -n 2 -- python3 samples/pytorch/ddp_train.py --steps 50
    torchrun --nproc-per-node 8 samples/pytorch/ddp_train.py          # the same, unprofiled

An MLP on a fixed random batch, DistributedDataParallel over NCCL on GPUs (Gloo on CPUs;
`--backend gloo` on GPUs too, with CUDA tensors). Ranks share the GPUs when there are more
ranks than GPUs (rank r uses GPU LOCAL_RANK mod the GPU count), which only Gloo allows.

What rankscope sees: under `rankscope profile --pytorch`, on CPU and GPU alike, every
optimizer step is a step, DDP's gradient all-reduces are communication, and forward,
backward and the optimizer are compute (on a GPU, the kernels). Without --pytorch, the
measured steps run inside one NVTX range named "measured" and each in a range named "step"
on a GPU (torch.cuda.nvtx); on a CPU this job then marks nothing.

With --torch-profile DIR, torch.profiler records the measured steps instead (a schedule
with one warm-up step, then one ProfilerStep#N per measured step) and each rank writes its
Chrome trace to DIR/rank<RANK>.json; bench/torch_compare.py and the end-to-end tests compare
it with what rankscope recorded.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50, help="measured steps (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="steps before the measured ones (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                        help="NCCL on GPUs and Gloo on CPUs with auto (default: %(default)s)")
    parser.add_argument("--torch-profile", metavar="DIR",
                        help="profile the measured steps with torch.profiler; each rank writes DIR/rank<RANK>.json")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.batch < 1 or args.width < 1 or args.depth < 1:
        parser.error("--steps, --batch, --width and --depth must be positive, --warmup not negative")
    if args.torch_profile and not os.path.isdir(args.torch_profile):
        parser.error(f"--torch-profile {args.torch_profile}: not a directory (each rank writes its trace into it)")
    return args


def main():
    args = parse_args()
    rank = int(os.environ.get("RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank % torch.cuda.device_count()) if use_cuda else torch.device("cpu")
    backend = args.backend if args.backend != "auto" else ("nccl" if use_cuda else "gloo")
    if backend == "nccl" and (not use_cuda or world_size > torch.cuda.device_count()):
        sys.exit(f"ddp_train.py: error: NCCL needs a GPU per rank ({world_size} rank(s), "
                 f"{torch.cuda.device_count() if use_cuda else 0} GPU(s)); use --backend gloo")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world_size)

    torch.manual_seed(0)
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 16)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if use_cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(args.batch, args.width, device=device)
    labels = torch.randint(0, 16, (args.batch,), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(inputs), labels)
        loss.backward()
        optimizer.step()

    def synchronize():
        if use_cuda:
            torch.cuda.synchronize()

    step_seconds = []
    profiled_warmup = 1 if args.torch_profile and args.warmup > 0 else 0
    for _ in range(args.warmup - profiled_warmup):
        step()
    synchronize()
    if args.torch_profile:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if use_cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        trace_file = os.path.join(args.torch_profile, f"rank{rank}.json")
        # The last warm-up step is the schedule's: torch.profiler starts recording after it.
        schedule = torch.profiler.schedule(wait=0, warmup=profiled_warmup, active=args.steps)
        with torch.profiler.profile(activities=activities, schedule=schedule,
                                    on_trace_ready=lambda done: done.export_chrome_trace(trace_file)) as profiler:
            for _ in range(profiled_warmup + args.steps):
                step()
                synchronize()
                profiler.step()
    else:
        if use_cuda:
            torch.cuda.nvtx.range_push("measured")
        for _ in range(args.steps):
            started = time.perf_counter()
            if use_cuda:
                torch.cuda.nvtx.range_push("step")
            step()
            if use_cuda:
                torch.cuda.nvtx.range_pop()
            synchronize()
            step_seconds.append(time.perf_counter() - started)
        if use_cuda:
            torch.cuda.nvtx.range_pop()
    dist.destroy_process_group()
    if rank == 0:
        pace = f", median step {statistics.median(step_seconds) * 1e3:.3f} ms" if step_seconds else ""
        print(f"ddp_train.py: {args.steps} measured steps on {world_size} rank(s), {device.type}, {backend}{pace}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
