"""A torch.distributed job in which rank 1 hangs before its fourth all-reduce, for
`rankscope profile --pytorch --hang-timeout`: rank 0 waits in that all-reduce forever."""
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
tensor = torch.ones(1024)
for step in range(6):
    if rank == 1 and step == 3:
        print("rank 1 hangs", flush=True)
        while True:
            time.sleep(3600)
    dist.all_reduce(tensor)
    time.sleep(0.05)
dist.destroy_process_group()
