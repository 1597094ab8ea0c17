"""What `rankscope profile --pytorch` records in a PyTorch job (collector/README.md,
"The PyTorch hook"), through the collector library the process already has preloaded
(its exported `rankscope_hook_*` functions, collector/hook_api.h):

- steps: one range named `step` per optimizer step (torch's global optimizer step hooks,
  or a wrapper of each optimizer class's `step` on torch < 2.0), from the end of the
  previous step (the first forward, for the first) to the end of the optimizer step, with
  the step number and the batch size (the first tensor argument's leading dimension at the
  step's first top-level module call) in its args;
- collectives issued through torch.distributed (and DDP's gradient all-reduces, through
  DDP's own default all-reduce comm hook, which the hook registers where DDP has none), with
  op, bytes, process group and a per-group sequence number: on Gloo from when the group's
  worker thread took it up (modelled: Gloo runs a group's work in order on 2 threads) to
  when it completed, on the thread that ran it; on NCCL only as an annotation of the call
  (NCCL's profiler plugin records NCCL's collectives);
- compute: the top-level forward of each module call, backward and the optimizer step, on
  the thread that ran them, less the time that thread waited for communication; on a CUDA
  model these are annotations (kernels are the compute) and torch's NVTX op ranges
  (`emit_nvtx`) join the kernels to the ops.

Each part that cannot work on this torch turns itself off with one line on stderr and a
`pytorch.<part>` meta entry saying why; the program goes on unchanged.
"""
import atexit
import ctypes
import json
import os
import sys
import threading
import time
import weakref

_lib = None
_local = threading.local()
_lock = threading.Lock()
_torch = None
_dist = None
_on_cuda = None            # the models run on CUDA (decided at the first top-level module call)
_nccl_plugin = "nccl" in os.environ.get("RANKSCOPE_TRACE", "nvtx,cuda,nccl").split(",")
_groups = {}               # id(process group) -> _Group
_ddp_modules = weakref.WeakSet()
_step = {"number": 0, "start": None, "samples": None, "forward_seen": False}

ROLE_ANNOTATION, ROLE_COMPUTE, ROLE_COMM = 0, 1, 2
# trace::CollectiveOp, trace::ReduceOp and trace::DataType numbers (trace/events.h).
_OPS = {"all_reduce": 1, "all_gather": 2, "reduce_scatter": 3, "broadcast": 4, "reduce": 5, "all_to_all": 6,
        "send": 7, "recv": 8, "barrier": 9, "gather": 10, "scatter": 11}
_REDUCE_OPS = {"SUM": 1, "PRODUCT": 2, "MAX": 3, "MIN": 4, "AVG": 5}
_DTYPES = {"int8": 1, "uint8": 2, "int32": 3, "int64": 5, "float16": 7, "float32": 8, "float64": 9, "bfloat16": 10}
# Gloo runs a process group's work in order on this many threads (ProcessGroupGloo's default).
_GLOO_THREADS = 2


def _now():
    return time.time_ns()


def _say(message):
    try:
        sys.stderr.write(f"rankscope: {message}\n")
    except Exception:
        pass


def _meta(key, value):
    if _lib is not None:
        _lib.rankscope_hook_meta(key.encode(), str(value).encode())


def _turn_off(part, why):
    _meta(f"pytorch.{part}", f"off: {why}")
    _say(f"PyTorch hook: {part} not recorded in pid {os.getpid()}: {why}")


def _range(name, start, end, role, args=None):
    if end >= start:
        _lib.rankscope_hook_range(name.encode(), start, end, role, json.dumps(args).encode() if args else None)


def _load_collector():
    library = ctypes.CDLL(None)  # the preloaded collector's symbols are global
    if not hasattr(library, "rankscope_hook_version"):
        return None
    library.rankscope_hook_version.restype = ctypes.c_int
    library.rankscope_hook_active.restype = ctypes.c_int
    library.rankscope_hook_range.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                                             ctypes.c_char_p]
    library.rankscope_hook_collective.argtypes = [
        ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64,
        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ctypes.c_int, ctypes.c_char_p]
    library.rankscope_hook_meta.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    if hasattr(library, "rankscope_hook_collective_begin"):  # older collectors lack it
        library.rankscope_hook_collective_begin.argtypes = [
            ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
            ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    if library.rankscope_hook_version() != 1:
        _say("PyTorch hook off: the collector library speaks another hook version")
        return None
    return library if library.rankscope_hook_active() else None


def install():
    """Called by sitecustomize at start-up: patches torch when it is imported."""
    global _lib
    if os.environ.get("RANKSCOPE_PYTORCH") != "1":
        return
    _lib = _load_collector()
    if _lib is None:
        return  # not under `rankscope profile`, or a process the collector does not record
    if "torch" in sys.modules:
        _patch_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportWatcher())


class _TorchImportWatcher:
    """Patches torch right after `import torch` has run torch/__init__.py."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch_torch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def _patch_torch(torch):
    global _torch, _dist
    _torch = torch
    _meta("pytorch.hook", f"on (torch {getattr(torch, '__version__', '?')}, python {sys.version.split()[0]})")
    for part, patch in (("steps", _patch_optimizers), ("compute", _patch_modules_and_backward),
                        ("collectives", _patch_distributed)):
        try:
            patch(torch)
        except Exception as error:
            _turn_off(part, f"{type(error).__name__}: {error}")


# ---- per-thread phases ---------------------------------------------------------------------

def _thread():
    state = _local.__dict__
    if "waits" not in state:
        state.update(waits=[], depth=0, forward_start=0, optimizer_depth=0, issued=[])
    return _local


def _emit_phase(name, start, end, issued_from=None):
    """A phase of the training thread as compute, less the times it waited for communication
    (blocking collectives, and DDP's wait for its last gradient all-reduces)."""
    state = _thread()
    waits = [(max(s, start), min(e, end)) for s, e in state.waits if e > start and s < end]
    if issued_from is not None:
        issued = state.issued[issued_from:]
        done = [c.done for c in issued if c.done is not None]
        if issued and done and max(done) > max(c.issue for c in issued):
            waits.append((max(c.issue for c in issued), min(max(done), end)))
    role = ROLE_ANNOTATION if _on_cuda else ROLE_COMPUTE
    cursor = start
    for wait_start, wait_end in sorted(waits):
        if wait_start > cursor:
            _range(name, cursor, wait_start, role)
        cursor = max(cursor, wait_end)
    if end > cursor:
        _range(name, cursor, end, role)
    if state.depth == 0 and state.optimizer_depth == 0:
        state.waits = [w for w in state.waits if w[1] > end]


# ---- steps and the optimizer -----------------------------------------------------------

def _optimizer_begin():
    state = _thread()
    state.optimizer_depth += 1
    if state.optimizer_depth == 1:
        state.optimizer_start = _now()


def _optimizer_end():
    state = _thread()
    state.optimizer_depth -= 1
    if state.optimizer_depth != 0:
        return
    end = _now()
    _emit_phase("optimizer.step", state.optimizer_start, end)
    if not _step["forward_seen"] or _step["start"] is None:
        return  # no forward since the last step: part of the same step
    args = {"step": _step["number"]}
    if _step["samples"] is not None:
        args["samples"] = _step["samples"]
    _range("step", _step["start"], end, ROLE_ANNOTATION, args)
    _step.update(number=_step["number"] + 1, start=end, samples=None, forward_seen=False)
    state.issued = []


def _patch_optimizers(torch):
    optimizer_module = sys.modules.get("torch.optim.optimizer")
    pre = getattr(optimizer_module, "register_optimizer_step_pre_hook", None)
    post = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if pre is not None and post is not None:
        pre(lambda optimizer, args, kwargs: _guarded(_optimizer_begin))
        post(lambda optimizer, args, kwargs: _guarded(_optimizer_end))
        _meta("pytorch.steps", "on: torch's optimizer step hooks")
        return
    optimizer_class = torch.optim.Optimizer
    original_init = optimizer_class.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _guarded(_wrap_step, type(self))

    optimizer_class.__init__ = init
    _meta("pytorch.steps", "on: a wrapper of each optimizer class's step (torch < 2.0)")


def _wrap_step(cls):
    step = cls.step
    if getattr(step, "_rankscope_wrapped", False):
        return

    def wrapped(*args, **kwargs):
        _guarded(_optimizer_begin)
        try:
            return step(*args, **kwargs)
        finally:
            _guarded(_optimizer_end)

    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(wrapped, attribute, getattr(step, attribute, None))
    wrapped.__dict__.update(getattr(step, "__dict__", {}))
    wrapped._rankscope_wrapped = True
    cls.step = wrapped


def _guarded(function, *args):
    """Runs one piece of the hook; an error turns the hook's recording off, never the job's."""
    global _lib
    try:
        return function(*args)
    except Exception as error:
        if _lib is not None:
            _turn_off("hook", f"{type(error).__name__}: {error} (in {function.__name__})")
            _lib = None
    return None


# ---- module forwards and backward --------------------------------------------------------

def _first_tensor(value, depth=0):
    if _torch.is_tensor(value):
        return value
    if depth < 2 and isinstance(value, (list, tuple)):
        for item in value:
            found = _first_tensor(item, depth + 1)
            if found is not None:
                return found
    if depth < 2 and isinstance(value, dict):
        for item in value.values():
            found = _first_tensor(item, depth + 1)
            if found is not None:
                return found
    return None


def _forward_pre(module, inputs):
    if _lib is None:
        return
    state = _thread()
    state.depth += 1
    if state.depth != 1:
        return
    global _on_cuda
    if _on_cuda is None:
        parameter = next(module.parameters(), None)
        if parameter is not None:
            _on_cuda = parameter.is_cuda
            _meta("pytorch.compute", "annotations: the model runs on CUDA, its kernels are the compute"
                  if _on_cuda else "on: top-level module forwards, backward and optimizer steps on the CPU")
            if _on_cuda:
                _start_emit_nvtx()
    state.forward_start = _now()
    if _step["start"] is None:
        _step["start"] = state.forward_start
    if not _step["forward_seen"]:
        _step["forward_seen"] = True
        tensor = _first_tensor(inputs)
        if tensor is not None and tensor.dim() > 0:
            _step["samples"] = int(tensor.shape[0])


def _forward_post(module, inputs, output):
    if _lib is None:
        return
    state = _thread()
    state.depth = max(0, state.depth - 1)
    if state.depth == 0:
        _emit_phase(f"{type(module).__name__}.forward", state.forward_start, _now())


def _start_emit_nvtx():
    if "nvtx" not in os.environ.get("RANKSCOPE_TRACE", "nvtx,cuda,nccl").split(","):
        _meta("pytorch.ops", "off: nvtx not selected (--trace)")
        return
    try:
        _torch.autograd.profiler.emit_nvtx(record_shapes=False).__enter__()
        _meta("pytorch.ops", "on: torch's NVTX op ranges (emit_nvtx)")
    except Exception as error:
        _turn_off("ops", f"emit_nvtx: {type(error).__name__}: {error}")


def _patch_modules_and_backward(torch):
    module_hooks = torch.nn.modules.module
    module_hooks.register_module_forward_pre_hook(lambda module, inputs: _guarded(_forward_pre, module, inputs))
    module_hooks.register_module_forward_hook(
        lambda module, inputs, output: _guarded(_forward_post, module, inputs, output))
    original_backward = torch.autograd.backward

    def backward(*args, **kwargs):
        if _lib is None:
            return original_backward(*args, **kwargs)
        state = _thread()
        start = _now()
        issued_from = len(state.issued)
        _guarded(_register_pending_ddp_hooks)
        try:
            return original_backward(*args, **kwargs)
        finally:
            if _lib is not None:
                end = _now()
                _settle(state.issued[issued_from:], 1.0)
                _guarded(_emit_phase, "backward", start, end, issued_from)

    backward.__doc__ = original_backward.__doc__
    torch.autograd.backward = backward


# ---- collectives -------------------------------------------------------------------------

class _Group:
    """What the hook knows of one process group: its identity on every rank, and Gloo's
    queue model."""

    def __init__(self, group):
        dist = _dist
        c10d = dist.distributed_c10d
        self.backend = str(dist.get_backend(group)).lower()
        name = getattr(group, "group_name", None)
        if name is None:
            name = getattr(c10d, "_pg_names", {}).get(group)
        if name is None:
            ranks = getattr(c10d, "_pg_group_ranks", {}).get(group)
            name = ",".join(str(r) for r in sorted(ranks)) if ranks else "world"
        self.name = str(name)
        self.size = group.size()
        self.rank = dist.get_rank(group)
        self.hash = _fnv1a64(f"{self.backend}:{self.name}")
        self.label = f"{self.backend} group {self.name} ({self.size} ranks)"
        self.sequence = 0
        self.recent = []  # the last collectives issued, for Gloo's queue model

    def started(self, collective):
        """When Gloo's worker thread took the collective up: after it was issued, after the
        one before it started, and once fewer than _GLOO_THREADS earlier ones still ran."""
        earlier = [c for c in self.recent if c.sequence < collective.sequence]
        start = collective.issue
        if earlier:
            before = earlier[-1]
            start = max(start, before.start if before.start is not None else before.issue)
            ends = sorted((c.done for c in earlier), key=lambda d: float("inf") if d is None else d)
            if len(ends) >= _GLOO_THREADS:
                busy_until = ends[-_GLOO_THREADS]
                if busy_until is not None:
                    start = max(start, busy_until)
        return min(start, collective.done)


class _Collective:
    __slots__ = ("group", "op", "name", "sequence", "issue", "start", "done", "bytes", "root", "peer",
                 "reduce_op", "dtype", "work")


def _fnv1a64(text):
    value = 0xcbf29ce484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value


def _group_of(group):
    if group is None:
        group = _dist.distributed_c10d._get_default_group()
    known = _groups.get(id(group))
    if known is None or known[0]() is not group:
        known = (weakref.ref(group) if _weakrefable(group) else (lambda g=group: g), _Group(group))
        _groups[id(group)] = known
        if len(_groups) == 1 or known[1].backend != "nccl":
            _meta("backend", known[1].backend)
    return known[1]


def _weakrefable(value):
    try:
        weakref.ref(value)
        return True
    except TypeError:
        return False


def _tensor_bytes(value):
    if _torch.is_tensor(value):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def _dtype_of(value):
    tensor = _first_tensor(value) if value is not None else None
    return _DTYPES.get(str(tensor.dtype).replace("torch.", ""), 0) if tensor is not None else 0


# Which argument of each torch.distributed function is the message, the root or the peer.
_COLLECTIVES = {
    "all_reduce": ("all_reduce", "tensor", None, None),
    "broadcast": ("broadcast", "tensor", "src", None),
    "reduce": ("reduce", "tensor", "dst", None),
    "all_gather": ("all_gather", "tensor", None, None),
    "all_gather_into_tensor": ("all_gather", "input_tensor", None, None),
    "_all_gather_base": ("all_gather", "input_tensor", None, None),
    "reduce_scatter": ("reduce_scatter", "output", None, None),
    "reduce_scatter_tensor": ("reduce_scatter", "output", None, None),
    "_reduce_scatter_base": ("reduce_scatter", "output", None, None),
    "all_to_all": ("all_to_all", "input_tensor_list", None, None),
    "all_to_all_single": ("all_to_all", "input", None, None),
    "gather": ("gather", "tensor", "dst", None),
    "scatter": ("scatter", "tensor", "src", None),
    "barrier": ("barrier", None, None, None),
    "send": ("send", "tensor", None, "dst"),
    "recv": ("recv", "tensor", None, "src"),
    "isend": ("send", "tensor", None, "dst"),
    "irecv": ("recv", "tensor", None, "src"),
}


def _patch_distributed(torch):
    global _dist
    import inspect
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available():
        _meta("pytorch.collectives", "off: this torch has no torch.distributed")
        return
    _dist = dist
    patched = []
    for function_name, (op, message, root, peer) in _COLLECTIVES.items():
        original = getattr(dist, function_name, None)
        if original is None or getattr(original, "_rankscope_wrapped", False):
            continue
        signature = inspect.signature(original)
        setattr(dist, function_name, _wrap_collective(original, signature, op, message, root, peer))
        patched.append(function_name)
    if hasattr(dist, "_broadcast_coalesced"):
        dist._broadcast_coalesced = _wrap_broadcast_coalesced(dist._broadcast_coalesced)
    original_destroy = dist.destroy_process_group

    def destroy_process_group(*args, **kwargs):
        _guarded(_settle_all)
        return original_destroy(*args, **kwargs)

    destroy_process_group.__doc__ = original_destroy.__doc__
    dist.destroy_process_group = destroy_process_group
    atexit.register(lambda: _guarded(_settle_all))
    _patch_ddp(torch)
    _meta("pytorch.collectives", "on: " + ", ".join(patched))


def _describe(op, group_info, bound, message, root, peer):
    collective = _Collective()
    collective.group = group_info
    collective.op = op
    collective.name = f"{group_info.backend}:{op}"
    collective.bytes = _tensor_bytes(bound.get(message)) if message else 0
    collective.dtype = _dtype_of(bound.get(message)) if message else 0
    collective.root = int(bound.get(root, -1)) if root and bound.get(root) is not None else -1
    collective.peer = int(bound.get(peer, -1)) if peer and bound.get(peer) is not None else -1
    reduce_op = bound.get("op")
    collective.reduce_op = 0
    if reduce_op is not None:
        collective.reduce_op = _REDUCE_OPS.get(str(reduce_op).split(".")[-1].upper(), 0)
    elif op in ("all_reduce", "reduce", "reduce_scatter"):
        collective.reduce_op = 1
    collective.start = None
    collective.done = None
    collective.work = None
    return collective


def _issue(collective):
    group = collective.group
    with _lock:
        group.sequence += 1
        collective.sequence = group.sequence
        collective.issue = _now()
        if group.backend == "gloo":
            group.recent.append(collective)
            del group.recent[:-8]
    _thread().issued.append(collective)
    # Entered now: a rank that hangs in it shows it in flight (the rank file's in-flight
    # state). NCCL's plugin reports NCCL's own.
    if _lib is not None and hasattr(_lib, "rankscope_hook_collective_begin") and not (
            group.backend == "nccl" and _nccl_plugin):
        _lib.rankscope_hook_collective_begin(
            collective.name.encode(), group.label.encode(), collective.issue, group.hash, collective.sequence,
            _OPS.get(collective.op, 0), collective.bytes, collective.root, collective.peer, group.rank, group.size)


def _complete(collective, done_ns=None):
    """Records a finished collective: Gloo's as communication on the thread that completed it,
    NCCL's as an annotation of the call (NCCL's plugin records the operation itself)."""
    if _lib is None:
        return
    group = collective.group
    with _lock:
        collective.done = done_ns if done_ns is not None else _now()
        start = group.started(collective) if group.backend == "gloo" else collective.issue
        collective.start = start
    args = {"op": collective.op, "bytes": collective.bytes, "group": group.name, "seq": collective.sequence}
    if collective.peer >= 0:
        args["peer"] = collective.peer
    if collective.root >= 0:
        args["root"] = collective.root
    if group.backend == "nccl" and _nccl_plugin:
        _range(collective.name, collective.issue, collective.done, ROLE_ANNOTATION, args)
        return
    op_number = _OPS.get(collective.op, 0)
    _lib.rankscope_hook_collective(
        collective.name.encode(), group.label.encode(), start, collective.done, group.hash, collective.sequence,
        op_number, collective.reduce_op, collective.dtype, collective.bytes, collective.root, collective.peer,
        group.rank, group.size, json.dumps(args).encode())


def _wrap_collective(original, signature, op, message, root, peer):
    takes_async = "async_op" in signature.parameters
    returns_work = original.__name__ in ("isend", "irecv")

    def wrapped(*args, **kwargs):
        if _lib is None:
            return original(*args, **kwargs)
        collective = None
        try:
            bound = signature.bind(*args, **kwargs).arguments
            group_info = _group_of(bound.get("group"))
            collective = _describe(op, group_info, bound, message, root, peer)
            if group_info.rank < 0:
                collective = None  # this rank is not in the group: torch does nothing
        except Exception as error:
            _guarded(_raise, error)
        if collective is None:
            return original(*args, **kwargs)
        wait_start = _now()
        _issue(collective)
        if takes_async and not kwargs.get("async_op", bound.get("async_op", False)):
            # Run it as torch would (issue, then wait), with the work's future in hand.
            kwargs = dict(bound)
            kwargs["async_op"] = True
            work = original(**kwargs)
            _watch(work, collective)
            if work is not None:
                work.wait()
            _thread().waits.append((wait_start, _now()))
            _settle([collective], 1.0)
            return None
        result = original(*args, **kwargs)
        if returns_work or takes_async:
            _watch(result, collective)
        else:
            _thread().waits.append((wait_start, _now()))
            _guarded(_complete, collective)
        return result

    wrapped.__name__ = original.__name__
    wrapped.__qualname__ = getattr(original, "__qualname__", original.__name__)
    wrapped.__doc__ = original.__doc__
    wrapped.__wrapped__ = original
    wrapped._rankscope_wrapped = True
    return wrapped


def _raise(error):
    raise error


def _watch(work, collective):
    """Records the collective when its work completes (on the thread that completes it)."""
    future = None
    try:
        future = work.get_future() if work is not None else None
    except Exception:
        future = None
    if future is None:
        _guarded(_complete, collective)
        return
    collective.work = work
    with _lock:
        _in_flight.append(collective)
    if hasattr(future, "add_done_callback"):
        future.add_done_callback(lambda _: _guarded(_complete, collective))
    else:
        future.then(lambda _: _guarded(_complete, collective))


# Collectives whose work carries a Python callback of the hook's, until their work finished.
_in_flight = []


def _settle(collectives, timeout_s, only_done=True):
    """Lets Gloo's worker threads finish the works of these collectives: after a work's future
    ran its Python callbacks, the worker still needs the GIL once (to let go of them) before
    the work is complete. A thread that holds the GIL while it destroys the process group
    (interpreter exit, destroy_process_group) would otherwise wait for that worker forever.
    Waits with the GIL released, at most timeout_s; with only_done, only for works whose
    callback already ran (so that it never waits for communication itself)."""
    deadline = time.monotonic() + timeout_s
    for collective in collectives:
        work = collective.work
        if work is None or (only_done and collective.done is None):
            continue
        try:
            while not work.is_completed() and time.monotonic() < deadline:
                time.sleep(0)
            finished = work.is_completed()
        except Exception:
            finished = True  # a work that cannot say: nothing to wait for
        if finished:
            collective.work = None
    with _lock:
        _in_flight[:] = [c for c in _in_flight if c.work is not None]


def _settle_all():
    with _lock:
        pending = list(_in_flight)
    _settle(pending, 5.0, only_done=False)


def _wrap_broadcast_coalesced(original):
    def wrapped(process_group, tensors, *args, **kwargs):
        if _lib is None:
            return original(process_group, tensors, *args, **kwargs)
        collective = None
        try:
            group_info = _group_of(process_group)
            source = args[1] if len(args) > 1 else kwargs.get("src", 0)
            collective = _describe("broadcast", group_info, {"tensors": list(tensors), "src": source}, "tensors",
                                   "src", None)
        except Exception as error:
            _guarded(_raise, error)
        if collective is None:
            return original(process_group, tensors, *args, **kwargs)
        _issue(collective)
        start = collective.issue
        result = original(process_group, tensors, *args, **kwargs)
        _thread().waits.append((start, _now()))
        _guarded(_complete, collective)
        return result

    wrapped.__name__ = getattr(original, "__name__", "_broadcast_coalesced")
    wrapped.__doc__ = getattr(original, "__doc__", None)
    wrapped._rankscope_wrapped = True
    return wrapped


# ---- DDP's gradient all-reduces ----------------------------------------------------------

def _patch_ddp(torch):
    ddp_class = torch.nn.parallel.DistributedDataParallel
    original_init = ddp_class.__init__
    original_register = ddp_class.register_comm_hook
    original_builtin = ddp_class._register_builtin_comm_hook

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _guarded(_ddp_modules.add, self)

    def register_comm_hook(self, *args, **kwargs):
        self._rankscope_comm_hook = "user"
        return original_register(self, *args, **kwargs)

    def register_builtin_comm_hook(self, *args, **kwargs):
        self._rankscope_comm_hook = "builtin"
        _meta("pytorch.ddp", "a built-in (C++) DDP comm hook: its gradient all-reduces are not recorded")
        return original_builtin(self, *args, **kwargs)

    ddp_class.__init__ = init
    ddp_class.register_comm_hook = register_comm_hook
    ddp_class._register_builtin_comm_hook = register_builtin_comm_hook


def _register_pending_ddp_hooks():
    for module in list(_ddp_modules):
        _register_ddp_hook(module)


def _register_ddp_hook(module):
    """Gives a DDP module without a comm hook DDP's own default all-reduce hook, which issues
    its gradient all-reduces through torch.distributed, where the hook sees them. At the
    start of the first backward: the latest moment DDP takes a comm hook, so that a program
    that registers its own before then keeps it."""
    if getattr(module, "_rankscope_comm_hook", None) is not None:
        return
    group = getattr(module, "process_group", None)
    if _group_of(group).backend == "nccl" and _nccl_plugin:
        module._rankscope_comm_hook = "nccl"
        return
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    type(module).register_comm_hook(module, group, default_hooks.allreduce_hook)
    module._rankscope_comm_hook = "rankscope"
    _meta("pytorch.ddp", "gradient all-reduces through DDP's default all-reduce comm hook (registered by rankscope)")
    _ddp_modules.discard(module)
