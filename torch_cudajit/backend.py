"""``torch.compile(model, backend="cudajit")``: a torch.compile backend that generates CUDA C++
with the plugin's public API and runs it through the plugin.

It runs on AOTAutograd, so training and inference both work: each forward and backward graph is
decomposed to aten operations, partitioned into fusion groups (pointwise operations of any
strides and broadcasting, and reductions over the last dimension: sum, mean, amax, amin, and
what decomposes to them: softmax, log_softmax, layer_norm, rms_norm, ...), and every group
becomes one CUDA C++ kernel; all kernels of a graph compile as one NVRTC program, through the
disk cache. Everything else (matmul, convolution, attention, random numbers, views) runs as the
aten operation it is, so a model that runs eagerly runs here. In inference graphs, attention
written out as matmul, softmax and matmul (with a causal mask or none) becomes aten's
scaled_dot_product_attention first (torch_cudajit/_attention.py), and, with the channels_last
option, 2-D convolutions take their operands in channels-last (torch_cudajit/_layout.py).

Options, given as ``torch.compile(..., options={...})``:
    debug: print each generated kernel, with the FX nodes it fuses, to stderr.
    channels_last: give 2-D convolutions of inference graphs channels-last operands (default
        False: every layout stays as the graph has it).

The graphs compiled last are kept in ``compiled_graphs()`` for inspection."""
from __future__ import annotations

import collections
import importlib.abc
import importlib.machinery
import sys

_OPTIONS = {"debug", "channels_last"}
_RECENT: collections.deque = collections.deque(maxlen=32)


def cudajit(gm, example_inputs, options: dict | None = None, **kwargs):
    """The backend: torch.compile calls it with a Dynamo graph and example inputs."""
    options = dict(options or {})
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ValueError(f"torch.compile backend 'cudajit': unknown option(s) "
                         f"{', '.join(sorted(unknown))}; it takes {', '.join(sorted(_OPTIONS))}")
    mode = kwargs.pop("mode", None)
    if mode not in (None, "default"):
        raise ValueError(f"torch.compile backend 'cudajit': mode={mode!r} is not supported; "
                         f"leave mode unset")
    debug = bool(options.get("debug", False))
    channels_last = options.get("channels_last", False)
    if not isinstance(channels_last, bool):
        raise TypeError(f"torch.compile backend 'cudajit': option channels_last must be a bool, "
                        f"got {channels_last!r}")
    from functools import partial

    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from ._fusion_ops import decompositions
    compiler = partial(_compile, debug=debug)
    extra = _record_float_symbols(gm)
    compiled = aot_autograd(fw_compiler=compiler, bw_compiler=compiler,
                            inference_compiler=partial(_compile, debug=debug, inference=True,
                                                       channels_last=channels_last),
                            decompositions=decompositions(),
                            partition_fn=min_cut_rematerialization_partition,
                            keep_inference_input_mutations=True)(gm, example_inputs)
    if not extra:
        return compiled

    def without_extra_outputs(*args):
        return compiled(*args)[:-extra]
    return without_extra_outputs


def _record_float_symbols(gm) -> int:
    """Keeps floats that change from recompiling on torch versions whose AOTAutograd
    (tensorify_python_scalars) specializes a float symbol when the graph only uses expressions
    of it (``-lr``, ``2 * lr``): each float Dynamo passes as a tensor and reads with item() is
    also returned as cudajit::float_tensor(item), where the symbol stands alone, and the caller
    drops these outputs. Returns how many were added."""
    import torch
    if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 15):
        return 0  # recorded there (pytorch#182136)
    items = [n for n in gm.graph.nodes
             if n.op == "call_method" and n.target == "item"
             and isinstance(n.meta.get("example_value"), torch.SymFloat)]
    if not items:
        return 0
    out = next(n for n in gm.graph.nodes if n.op == "output")
    results = out.args[0]
    if not isinstance(results, (tuple, list)):
        return 0
    with gm.graph.inserting_before(out):
        added = []
        for n in items:
            t = gm.graph.call_function(torch.ops.cudajit.float_tensor.default, (n,))
            t.meta["example_value"] = torch.empty((), dtype=torch.float64)
            added.append(t)
    out.args = (tuple(results) + tuple(added),)
    gm.recompile()
    return len(added)


def _compile(gm, example_inputs, *, debug: bool, inference: bool = False,
             channels_last: bool = False):
    from torch._functorch.aot_autograd import make_boxed_func

    from ._fusion import compile_graph
    if inference:
        # Attention written out becomes aten's fused attention, where no backward graph reads
        # the scores it no longer computes.
        from ._attention import rewrite
        rewrite(gm)
    if inference and channels_last:
        # 2-D convolutions in channels-last, as cuDNN's tensor cores take them; the groups
        # around them walk that memory order.
        from ._layout import channels_last_convolutions
        channels_last_convolutions(gm)
    compiled = compile_graph(gm, debug=debug)
    _RECENT.append(compiled)
    return make_boxed_func(compiled.graph_module.forward)


def compiled_graphs() -> list:
    """The graphs this process compiled most recently (at most 32), oldest first: each with
    its generated ``source``, its ``launches`` and the rewritten ``graph_module``."""
    return list(_RECENT)


def register() -> None:
    """Registers the backend under the name "cudajit" (done by ``import torch_cudajit`` as soon
    as torch.compile loads its backend registry, and by the package's entry point)."""
    from torch._dynamo.backends import registry
    _register_in(registry)


def _register_in(registry) -> None:
    # Registered already, or found as the installed package's entry point, which torch loads
    # and registers itself when the name is first looked up (registering it here too would
    # make that a duplicate).
    if "cudajit" in registry._COMPILER_FNS or registry._BACKENDS.get("cudajit") is not None:
        return
    registry.register_backend(compiler_fn=cudajit, name="cudajit")


_REGISTRY = "torch._dynamo.backends.registry"


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Registers the backend right after torch's backend registry is imported, so that
    ``import torch_cudajit`` does not import torch._dynamo (over a second) itself."""

    def find_spec(self, name, path, target=None):
        if name != _REGISTRY:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        real = spec.loader

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return real.create_module(spec)

            def exec_module(self, module):
                real.exec_module(module)
                sys.modules[name] = module
                _remove_hook()
                _register_in(module)

        spec.loader = _Loader()
        return spec


_HOOK = _RegisterOnImport()


def _remove_hook():
    if _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)


def _install() -> None:
    if _REGISTRY in sys.modules:
        register()
    elif _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)
