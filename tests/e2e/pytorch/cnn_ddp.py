#!/usr/bin/env python3
"""A second real PyTorch workload for the end-to-end tests of `rankscope profile --pytorch`:
a small CNN (convolutions with BatchNorm, whose buffers DDP broadcasts before every forward)
trained with DDP over Gloo on synthetic images through a DataLoader with a
DistributedSampler, Adam, and a blocking all-reduce of the loss each step, as training
scripts log it. Launch it with torchrun or `rankscope profile -n N`.

    cnn_ddp.py [--steps N] [--batch B]
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    images = torch.randn(args.batch * args.steps * world, 3, 32, 32)
    labels = torch.randint(0, 10, (images.shape[0],))
    dataset = TensorDataset(images, labels)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=DistributedSampler(dataset, shuffle=False))
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 10))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = 0
    for batch, target in loader:
        optimizer.zero_grad()
        loss = loss_fn(ddp(batch), target)
        loss.backward()
        optimizer.step()
        logged = loss.detach().clone()
        dist.all_reduce(logged)
        steps += 1
    dist.barrier()
    if rank == 0:
        print(f"cnn_ddp.py: {steps} steps on {world} ranks, last mean loss {logged.item() / world:.4f}")
    dist.destroy_process_group()
    return 0 if steps == args.steps else 1


if __name__ == "__main__":
    raise SystemExit(main())
