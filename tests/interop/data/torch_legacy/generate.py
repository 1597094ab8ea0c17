#!/usr/bin/python3
"""Writes the older torch.profiler traces of this folder (README.md says what they hold).

Run with Debian's python3-torch (1.13, built without Kineto), on the CPU:
    /usr/bin/python3 tests/interop/data/torch_legacy/generate.py [OUT_DIR]
Without Kineto, torch.profiler's export_chrome_trace writes the older format: a bare JSON
array of "X" events without "cat", "pid": "CPU functions", "tid" the profiler's own thread
number, "ts"/"dur" whole microseconds since the profiler started, "args" always {}.

Two traces: one process (cpu_single.json), and a 2-rank DDP job over Gloo
(ddp_gloo_rank{0,1}.json.gz), each under a schedule so that ProfilerStep#N ranges appear.
The files differ from run to run only in their times.
"""
import gzip
import os
import shutil
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, schedule

STEPS = 4  # wait 1, warm up 1, record 2: ProfilerStep#2 and #3


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


def train(model, profiler):
    x = torch.ones(2, 4)
    for _ in range(STEPS):
        model(x).sum().backward()
        profiler.step()


def write_gzip(path):
    with open(path, "rb") as src, gzip.GzipFile(path + ".gz", "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)


def single(out):
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "cpu_single.json"))) as p:
        train(tiny_model(), p)


def ddp_worker(rank, world, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(tiny_model())
    path = os.path.join(out, f"ddp_gloo_rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as p:
        train(model, p)
    dist.destroy_process_group()
    write_gzip(path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    if torch.autograd.kineto_available():
        sys.exit("generate.py: this torch has Kineto; run it with Debian's /usr/bin/python3 (python3-torch 1.13)")
    single(out)
    mp.spawn(ddp_worker, args=(2, free_port(), out), nprocs=2)


if __name__ == "__main__":
    main()
