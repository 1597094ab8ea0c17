"""rankscope's PyTorch hook, started in every Python process of a job.

`rankscope profile --pytorch` puts this directory first on PYTHONPATH and sets
RANKSCOPE_PYTORCH=1, so Python runs this file at start-up (site.py imports `sitecustomize`).
It installs the hook (rankscope_pytorch_hook.py), then runs the sitecustomize module this
one shadows, if there is one, as Python would have. Nothing here may break the program: a
failure turns the hook off with one line on stderr.
"""
import os
import sys


def _rankscope_install_hook():
    try:
        import rankscope_pytorch_hook
        rankscope_pytorch_hook.install()
    except Exception as error:  # the hook never breaks the user's program
        try:
            sys.stderr.write(f"rankscope: the PyTorch hook is off in pid {os.getpid()}: {error!r}\n")
        except Exception:
            pass


def _rankscope_run_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    path = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # what site.py does with a failing sitecustomize
        sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(error).__name__}: {error}\n")


_rankscope_install_hook()
_rankscope_run_shadowed_sitecustomize()
