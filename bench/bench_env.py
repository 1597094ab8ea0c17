"""What the benchmark scripts share: a clean environment for runs without the collector,
and a free port for a rendezvous."""
import os
import socket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_environment():
    """This process's environment without the collector's injection or a launcher's ranks."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANKSCOPE_", "NVTX_INJECTION", "CUDA_INJECTION", "NCCL_PROFILER"))}
    for name in ("LD_PRELOAD", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env
