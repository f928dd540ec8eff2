"""Attention written out as matmul, softmax and matmul, found in an inference graph and replaced
by aten's scaled_dot_product_attention (flash or memory-efficient attention on the GPU), which
never writes the score matrix. The cudajit backend runs this before it partitions a graph.

The form matched is what AOTAutograd leaves of ``softmax(q @ k.transpose(-2, -1) * scale) @ v``
with the backend's decompositions: the batched matmuls (bmm, with the views, expands and
contiguous copies around them), an optional scale (a multiplication or a division by a number),
an optional causal mask (``where(~tril(ones(t, t)), -inf, scores)``, which masked_fill becomes)
and the decomposed softmax over the last dimension (amax, sub, exp, sum, div, with casts to
float32 and back for 16-bit dtypes). Any other mask, a softmax read elsewhere (attention weights
returned), or a graph with a backward leaves the graph as it is."""
from __future__ import annotations

import math

import torch
import torch.fx as fx

from ._fusion import _reduction, _same, _same_shape, _val

aten = torch.ops.aten

# Operations that reshape or copy a tensor without changing its values in row-major order:
# what the matmul decomposition puts between a 4-D operand and its bmm.
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
_COPIES = {aten.clone.default, aten.expand.default}


def _single_user(node) -> bool:
    return isinstance(node, fx.Node) and len(node.users) == 1


def _is(node, *targets) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and node.target in targets


def _operand(node, batch: int, chain: list):
    """The tensor of shape (*B, m, n) with prod(B) == batch behind a bmm operand: views that
    merge the batch dimensions, expands that broadcast nothing and contiguous copies are
    stepped over (and recorded in `chain`); None if something else stands between."""
    while True:
        v = _val(node)
        if v is None:
            return None
        if v.dim() >= 3 and _same(math.prod(v.shape[:-2]), batch) and \
                not (_is(node, *_RESHAPES) or _is(node, *_COPIES)):
            return node
        if _is(node, *_RESHAPES) or _is(node, aten.clone.default):
            src = node.args[0]
        elif _is(node, aten.expand.default):
            src = node.args[0]
            if _val(src) is None or not _same_shape(_val(src).shape, v.shape):
                return None  # a real broadcast
        else:
            return None
        sv = _val(src)
        if sv is None or sv.dim() < 2 or not _same_shape(sv.shape[-2:], v.shape[-2:]) or \
                not _single_user(node):
            return None
        chain.append(node)
        if sv.dim() >= 3 and _same(math.prod(sv.shape[:-2]), batch) and \
                not (_is(src, *_RESHAPES) or _is(src, *_COPIES)):
            return src
        node = src


def _softmax_input(p, chain: list):
    """x if `p` is the decomposed softmax(x, -1) (casts to float32 and back allowed)."""
    if _is(p, aten._to_copy.default) and _single_user(p):
        chain.append(p)
        p = p.args[0]
    if not (_is(p, aten.div.Tensor) and _single_user(p)):
        return None
    e, total = p.args
    if not (_is(e, aten.exp.default) and _is(total, aten.sum.dim_IntList) and total.args[0] is e
            and len(e.users) == 2 and _single_user(total) and _kept_last_dim(total)):
        return None
    sub = e.args[0]
    if not (_is(sub, aten.sub.Tensor) and _single_user(sub)):
        return None
    x, top = sub.args
    if not (_is(top, aten.amax.default) and top.args[0] is x and _single_user(top)
            and _kept_last_dim(top) and len(x.users) == 2):
        return None
    chain += [p, total, e, sub, top]
    if _is(x, aten._to_copy.default):
        chain.append(x)
        x = x.args[0]
        if not _single_user(x):
            return None
        return x, 1
    return x, 2  # read by the amax and the subtraction


def _kept_last_dim(reduction) -> bool:
    """A reduction over the last dimension that keeps it (as the partition reads them)."""
    found = _reduction(reduction)
    return found is not None and found[1]


def _causal_mask(cond, t: int, s: int) -> list | None:
    """The nodes of ``~tril(ones(t, s))`` (True above the diagonal), or None."""
    if not (_is(cond, aten.bitwise_not.default, aten.logical_not.default) and _single_user(cond)):
        return None
    tril = cond.args[0]
    if not (_is(tril, aten.tril.default) and _single_user(tril)) or \
            (len(tril.args) > 1 and tril.args[1] != 0) or tril.kwargs.get("diagonal", 0) != 0:
        return None
    ones = tril.args[0]
    if not (_is(ones, aten.ones.default) and _single_user(ones)) or \
            not _same_shape(list(ones.args[0]), [t, s]):
        return None
    return [cond, tril, ones]


def _scores(x, users: int, chain: list):
    """(scores node, scale, causal) for the softmax input x (read by `users` nodes of the
    softmax): an optional causal mask, then an optional multiplication or division by a
    number."""
    causal = False
    v = _val(x)
    if _is(x, aten.where.self) and len(x.users) == users:
        cond, fill, scores = x.args
        fill_ok = (_is(fill, aten.scalar_tensor.default) and fill.args[0] == -math.inf
                   and _single_user(fill)) or (not isinstance(fill, fx.Node) and fill == -math.inf)
        mask = _causal_mask(cond, v.shape[-2], v.shape[-1])
        if not fill_ok or mask is None:
            return None
        chain += [x] + mask + ([fill] if isinstance(fill, fx.Node) else [])
        causal, x, users = True, scores, 1
    scale = 1.0
    if _is(x, aten.mul.Tensor, aten.div.Tensor) and len(x.users) == users and \
            isinstance(x.args[1], (int, float)) and not isinstance(x.args[1], bool) and x.args[1] != 0:
        scale = float(x.args[1]) if x.target is aten.mul.Tensor else 1.0 / float(x.args[1])
        chain.append(x)
        x, users = x.args[0], 1
    return x, scale, causal, users


def _match(out_view):
    """For the 4-D (or 3-D) view of a bmm's output: (q, k_transposed, v, scale, causal, nodes
    the replacement makes dead), or None."""
    if not _is(out_view, *_RESHAPES):
        return None
    pv = out_view.args[0]
    if not (_is(pv, aten.bmm.default) and _single_user(pv)):
        return None
    out = _val(out_view)
    batch = _val(pv).shape[0]
    if out is None or out.dim() < 3 or not _same(math.prod(out.shape[:-2]), batch):
        return None
    chain = [out_view, pv]
    p = _operand(pv.args[0], batch, chain)
    v = _operand(pv.args[1], batch, chain)
    if p is None or v is None:
        return None
    got = _softmax_input(p, chain)
    if got is None:
        return None
    found = _scores(*got, chain)
    if found is None:
        return None
    qk_view, scale, causal, users = found
    if not (_is(qk_view, *_RESHAPES) and len(qk_view.users) == users):
        return None
    qk = qk_view.args[0]
    if not (_is(qk, aten.bmm.default) and _single_user(qk)):
        return None
    chain += [qk_view, qk]
    q = _operand(qk.args[0], batch, chain)
    kt = _operand(qk.args[1], batch, chain)
    if q is None or kt is None:
        return None
    shapes = [tuple(_val(n).shape) for n in (q, kt, v)]
    dtypes = {_val(n).dtype for n in (q, kt, v)} | {_val(p).dtype, out.dtype}
    if len(dtypes) != 1 or dtypes.pop() not in (torch.float16, torch.bfloat16, torch.float32):
        return None
    (qb, t, d), (kb, d2, s), (vb, s2, dv) = [(sh[:-2], sh[-2], sh[-1]) for sh in shapes]
    if not (_same_shape(qb, kb) and _same_shape(qb, vb) and _same_shape(qb, out.shape[:-2])
            and _same(d, d2) and _same(s, s2) and _same_shape(out.shape[-2:], (t, dv))):
        return None
    return q, kt, v, scale, causal, chain


def rewrite(gm: fx.GraphModule) -> int:
    """Replaces each attention the graph writes out by scaled_dot_product_attention; returns how
    many. Inference graphs only: a backward graph would still read what the forward no longer
    computes."""
    count = 0
    for node in list(gm.graph.nodes):
        # The nodes a rewrite erases all come before its output view in graph order: each node
        # reached here is still in the graph.
        if node.op != "call_function":
            continue
        m = _match(node)
        if m is None:
            continue
        q, kt, v, scale, causal, chain = m
        g = gm.graph
        with g.inserting_before(node):
            k = g.call_function(aten.transpose.int, (kt, -2, -1))
            attn = g.call_function(aten.scaled_dot_product_attention.default, (q, k, v),
                                   {"is_causal": causal, "scale": scale})
        with _fake_mode(q):
            k.meta["val"] = aten.transpose.int(_val(kt), -2, -1)
            attn.meta["val"] = torch.empty_like(_val(node), memory_format=torch.contiguous_format)
        node.replace_all_uses_with(attn)
        for n in chain:  # users first: the chain runs from the output back to q, k and v
            if not n.users:
                g.erase_node(n)
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count


def _fake_mode(node):
    from contextlib import nullcontext

    from torch._guards import detect_fake_mode
    mode = detect_fake_mode([_val(node)])
    return mode if mode is not None else nullcontext()
