"""Channels-last convolutions in inference graphs: the cudajit backend runs this before it
partitions a graph when ``options={"channels_last": True}`` asks for it (off by default).

cuDNN's tensor-core convolutions work in NHWC. Given NCHW tensors, aten converts them at every
call (the weight too) or runs slower NCHW kernels. Here each 2-D convolution gets its input
and its weight in channels-last:
- the input through a copy in the graph, where it is not channels-last already (the output of
  an earlier convolution, or of a pointwise group over one, already is);
- the weight through ``KeptChannelsLast``, which copies it once and again only when the
  weight's memory, layout or version counter changed.

The graph's meta values are then propagated again on its fake tensors, so that the pointwise
groups downstream see their operands in channels-last and write their outputs so (the fusion
backend walks them in that memory order). A graph output whose layout this changes is copied
back to the layout eager gives it, inside the group that computes it."""
from __future__ import annotations

import torch
import torch.fx as fx

from ._host import _val

aten = torch.ops.aten


class KeptChannelsLast:
    """``w.contiguous(memory_format=torch.channels_last)``, made again only when `w` is
    another tensor, its data pointer, layout or version counter changed (an in-place update,
    ``load_state_dict``, an optimizer step all bump the counter). A write through ``w.data``
    does not bump it, and is not seen. Inference tensors have no version counter: theirs is
    copied at every call."""

    __name__ = "channels_last_weight"

    def __init__(self):
        self.weight = None  # the tensor last converted, held so that its id stays its own
        self.key = None
        self.copy = None

    def __call__(self, w):
        if w.is_inference():
            return w.contiguous(memory_format=torch.channels_last)
        key = (w.data_ptr(), w._version, w.shape, w.stride())
        if w is not self.weight or key != self.key:
            self.copy = w.contiguous(memory_format=torch.channels_last)
            self.weight, self.key = w, key
        return self.copy


def _channels_last(v) -> bool:
    return v.is_contiguous(memory_format=torch.channels_last)


def _eligible(node, fusable_device) -> bool:
    """A 2-D convolution on a device the backend fuses for, of floating input and weight."""
    if node.op != "call_function" or node.target is not aten.convolution.default:
        return False
    x, w = _val(node.args[0]), _val(node.args[1])
    return (isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor) and x.dim() == 4
            and w.dim() == 4 and x.is_floating_point() and fusable_device(x))


def channels_last_convolutions(gm: fx.GraphModule) -> int:
    """Rewrites `gm`'s 2-D convolutions to take channels-last operands (see the module's
    docstring) and propagates its meta values again. Returns how many convolutions changed."""
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from ._fusion import _fusable_device
    graph = gm.graph
    convs = [n for n in graph.nodes if _eligible(n, _fusable_device)]
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode([_val(n) for n in placeholders])
    if not convs or mode is None:
        return 0
    output = next(n for n in graph.nodes if n.op == "output")
    before = {n: _val(n) for n in output.all_input_nodes}
    metas = {n: n.meta.get("val") for n in graph.nodes}
    inputs, weights = [], []
    copies: dict = {}  # operand -> its copy, shared by the convolutions that read it
    for conv in convs:
        for operand, made in ((conv.args[0], inputs), (conv.args[1], weights)):
            if _channels_last(_val(operand)):
                continue
            copy = copies.get(operand)
            if copy is None:
                with graph.inserting_before(conv):
                    # A weight's copy is a clone while the meta values are propagated, and its
                    # keeper after.
                    copy = copies[operand] = graph.call_function(
                        aten.clone.default, (operand,), {"memory_format": torch.channels_last})
                made.append(copy)
            conv.replace_input_with(operand, copy)
    if not inputs and not weights:
        return 0
    try:
        FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*[_val(n) for n in placeholders])
    except Exception:  # noqa: BLE001  (an operation fake tensors cannot run again)
        # The graph as it was: the copies out, every meta value back. The convolutions keep
        # the layouts the graph gives them, as without the option.
        for copy in inputs + weights:
            copy.replace_all_uses_with(copy.args[0])
            graph.erase_node(copy)
        for n, val in metas.items():
            if val is not None:
                n.meta["val"] = val
        return 0
    for copy in inputs:
        # An input made by what an earlier convolution's output flows through is channels-last
        # now: its copy goes.
        if _channels_last(_val(copy.args[0])):
            copy.replace_all_uses_with(copy.args[0])
            graph.erase_node(copy)
    for n, was in before.items():
        now = _val(n)
        if not (isinstance(was, torch.Tensor) and isinstance(now, torch.Tensor)) or \
                now.stride() == was.stride():
            continue
        formats = [f for f in (torch.contiguous_format, torch.channels_last)
                   if was.is_contiguous(memory_format=f)]
        if not formats:
            continue  # a layout no copy makes as such (eager's own, through a view): left
        with graph.inserting_before(output):
            back = graph.call_function(aten.clone.default, (n,), {"memory_format": formats[0]})
        back.meta["val"] = was
        output.replace_input_with(n, back)
    for copy in weights:
        # Each weight's copy becomes its own keeper, shared by the convolutions that read it.
        copy.target, copy.args, copy.kwargs = KeptChannelsLast(), (copy.args[0],), {}
    graph.lint()
    gm.recompile()
    return len(convs)
