"""The cudajit backend's graph compiler: partitions an aten FX graph into fusion groups,
writes one CUDA C++ kernel per group with the plugin's public API (cj::Array,
cj::for_each_run, cj::elementwise, cj::block_reduce, cj::op), one for all groups whose kernels
are the same code, compiles all kernels of the graph as one NVRTC program, and returns the graph
with each group replaced by a launch.

A group has an iteration shape S. Pointwise groups compute every member once per element of
S, in runs of RUN elements along the last dimension; a cat along the last dimension is such a
member, whose branch for a position computes that operand at the position less the branch's
start. Row groups also reduce over S's last
dimension: a thread block takes a row, computes the reductions in stages (a reduction may read
values computed from earlier ones, as softmax and layer norm do), then the row's element
values; a row that fits is loaded into registers once, and members that are one value per row
(the reductions and pointwise operations on them) are kept in registers. Every size is read from the
tensors when the group runs, so new sizes never compile anything: the specialization is on
dtype, rank and layout only. Operations that are not fused (matmul, convolution, views, random
numbers, anything unlisted) stay in the graph as the aten calls they are."""
from __future__ import annotations

import hashlib
import math
import operator
import sys
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from . import _fusion_ops as ops
from ._host import _METHODS, _val, lighten
from ._loader import _C

aten = torch.ops.aten

_VIEW_OPS = {aten.view.default, aten._unsafe_view.default, aten.unsqueeze.default,
             aten.squeeze.dim, aten.squeeze.dims, aten.reshape.default}
# Run kernels take RUN consecutive elements of the last dimension per thread (16 bytes of a
# 16-bit dtype, one vector access); row kernels keep ROW_RUNS runs a thread in registers.
RUN = 8
ROW_RUNS = 2
ROW_LANES = RUN * ROW_RUNS
# The most parameters the partition lets a group's kernel have (Partition._within_bound): the
# plugin's bound on a kernel's parameters, less room for what that count leaves out (a kernel's
# sizes, a tensor read both per element and per row). A larger group is split where it would
# pass the bound; a kernel still over the plugin's own is left to aten (_Emitter.emit).
_GROUP_PARAMS = _C.max_kernel_params - 8


def _is_tensor(node) -> bool:
    return isinstance(_val(node), torch.Tensor)


def _fusable_device(t: torch.Tensor) -> bool:
    return t.device.type in ("cuda", "meta")


def _is_scalar_input(node) -> bool:
    """A number the group takes as a kernel parameter: a symbolic int or float, or a 0-d CPU
    tensor (how torch.compile passes a float it saw change)."""
    v = _val(node)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)):
        return True
    return isinstance(v, torch.Tensor) and v.dim() == 0 and v.device.type == "cpu"


def _same(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    return bool(statically_known_true(a == b))


def _multiple_of(x, n: int) -> bool:
    """Whether a size or stride is a multiple of n for every value its symbols may take (a
    stride T * 64 is a multiple of 8 whatever T is); adds no guard."""
    if isinstance(x, int):
        return x % n == 0
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    return bool(statically_known_true(x % n == 0))


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def _broadcasts_to(shape, target) -> bool:
    """Whether a tensor of `shape` broadcasts to `target` (right-aligned)."""
    if len(shape) > len(target):
        return False
    for s, t in zip(reversed(shape), reversed(target)):
        if not (_same(s, 1) or _same(s, t)):
            return False
    return True


def _hint(size) -> int:
    if isinstance(size, int):
        return size
    from torch.fx.experimental import symbolic_shapes
    # A size's example value, which guards nothing (optimization_hint from torch 2.12 on).
    hint = getattr(symbolic_shapes, "optimization_hint", None) or symbolic_shapes.hint_int
    return int(hint(size))


@dataclass
class _Member:
    node: fx.Node
    level: str            # "e": one value per element of S; "keep"/"drop": one per row
    ctype: str
    var: str
    stage: int = 0        # the reductions (row kernels' passes) it waits for
    branch: int = -1      # a member computed inside branch k of a cat (at its operand's shape)


@dataclass
class _Cat:
    """A cat along the last dimension fused into a pointwise group: each position of the
    output takes the branch its last coordinate falls in, which computes that operand (its
    members, or a load of a leaf tensor) at the position shifted back by the branch's start."""
    operands: list        # fx nodes, in order
    sizes: list           # each operand's (static) size along the last dimension

    @property
    def starts(self) -> list:
        """Each operand's first position along the last dimension."""
        return [sum(self.sizes[:k]) for k in range(len(self.sizes))]


@dataclass(eq=False)
class Group:
    """One fusion group: its members in graph order and its iteration shape."""
    index: int
    shape: tuple
    row: bool = False
    members: dict = field(default_factory=dict)   # node -> _Member
    cats: dict = field(default_factory=dict)      # cat node -> _Cat
    # For the bound on its kernel's parameters (Partition._within_bound), as of `counted`
    # members: what the group reads from outside, and its members read outside.
    reads: set = field(default_factory=set)
    outs: set = field(default_factory=set)
    counted: int = -1

    def keep_shape(self):
        return tuple(self.shape[:-1]) + (1,)

    def drop_shape(self):
        return tuple(self.shape[:-1])

    def level_of(self, shape):
        if _same_shape(shape, self.shape):
            return "e"
        if self.row and _same_shape(shape, self.keep_shape()):
            return "keep"
        if self.row and _same_shape(shape, self.drop_shape()):
            return "drop"
        return None

    def level_shape(self, level):
        return {"e": tuple(self.shape), "keep": self.keep_shape(), "drop": self.drop_shape()}[level]


def _supported_dtype(dtype) -> bool:
    return dtype in ops.STORAGE


def _operands(node):
    """The operands of a fused operation: (tensor-or-number arguments, constant arguments)."""
    t = node.target
    a = node.args
    if t in ops.UNARY or t in ops.CASTS:
        return [a[0]], {}
    if t in ops.BINARY or t in ops.COMPARE:
        return [a[0], a[1]], {"alpha": node.kwargs.get("alpha", 1)}
    if t is aten.div.Tensor_mode:
        return [a[0], a[1]], {"rounding_mode": node.kwargs.get("rounding_mode")}
    if t is aten.pow.Scalar:
        return [a[0], a[1]], {}
    if t is aten.where.self:
        return [a[0], a[1], a[2]], {}
    return None, None


def _pow_by_constant(a: str, exponent, ctype: str):
    """x ** c for the constants torch's own pow kernels special-case (2, 3 and -2 as products,
    0.5, -0.5 and -1 as sqrt, rsqrt and a reciprocal): the same results as eager, without a
    pow call's logarithm and exponential for each element. None for any other exponent."""
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)):
        return None
    one = ops.literal(1, ctype)
    return {2: f"({a} * {a})", 3: f"({a} * {a} * {a})", -2: f"({one} / ({a} * {a}))",
            0.5: f"cj::op::sqrt({a})", -0.5: f"cj::op::rsqrt({a})",
            -1: f"({one} / {a})"}.get(exponent)


def _constant_along_runs(node, rank: int, along: int) -> bool:
    """Whether a tensor input has the same value at every position of a run, which lies along
    dimension `along` of the rank-`rank` iteration shape: the input (right-aligned, expanded
    when launched) has no such dimension or its size there is 1 (a per-channel statistic over
    W)."""
    v = _val(node)
    if not isinstance(v, torch.Tensor):
        return False
    d = along - (rank - v.dim())
    return d < 0 or (isinstance(v.shape[d], int) and v.shape[d] == 1)


def _cast_supported(node) -> bool:
    kw = node.kwargs
    if node.target is aten._to_copy.default:
        if set(kw) - {"dtype", "device", "layout", "memory_format", "pin_memory"}:
            return False
        dev = kw.get("device")
        src = _val(node.args[0])
        if dev is not None and torch.device(dev) != src.device:
            return False
        if kw.get("layout") not in (None, torch.strided):
            return False
    return True


def _pointwise(node) -> bool:
    t = node.target
    if t in ops.UNARY or t in ops.BINARY or t in ops.COMPARE or t in (aten.div.Tensor_mode,
                                                                        aten.pow.Scalar,
                                                                        aten.where.self):
        return True
    return t in ops.CASTS and _cast_supported(node)


def _reduction(node):
    """(input, keepdim) when `node` is a supported reduction over its input's last dimension."""
    if node.target not in ops.REDUCTIONS:
        return None
    x = node.args[0]
    if not _is_tensor(x):
        return None
    rank = _val(x).dim()
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if isinstance(dims, int):
        dims = [dims]
    if not dims or len(dims) != 1 or rank == 0:
        return None
    if dims[0] % rank != rank - 1:
        return None
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    if node.target is aten.sum.dim_IntList and node.kwargs.get("dtype") not in (None, _val(node).dtype):
        return None
    return x, bool(keepdim)


def _reads_and_outs(members) -> tuple:
    """(the nodes `members` read that are not members, the members a non-member reads)."""
    reads = {x for n in members for x in n.all_input_nodes if x not in members}
    return reads, {n for n in members if any(u not in members for u in n.users)}


class Partition:
    """Fusion groups of one graph, formed greedily in graph order."""

    def __init__(self, graph: fx.Graph):
        self.graph = graph
        self.order = {n: i for i, n in enumerate(graph.nodes)}
        self.group_of: dict = {}
        self.groups: list = []
        for node in graph.nodes:
            if node.op == "call_function":
                self._place(node)
        self._absorb_broadcast_groups()
        self._merge_siblings()

    def _absorb_broadcast_groups(self):
        """A pointwise group of a smaller shape whose values only one other group reads (a
        bias scaled before it is added) is computed inside that group, once per element
        where it is read, instead of being stored and loaded."""
        for h in reversed(list(self.groups)):
            if h.row or not h.members:
                continue
            users = {u for n in h.members for u in n.users if u not in h.members}
            targets = {self.group_of.get(u) for u in users}
            if len(targets) != 1 or None in targets:
                continue
            g = targets.pop()
            levels = {g.members[u].level for u in users}
            if len(levels) != 1 or any(g.members[u].branch >= 0 for u in users):
                continue
            level = levels.pop()
            if level == "drop" or not _broadcasts_to(h.shape, g.level_shape(level)):
                continue
            if h.cats and (g.row or not _same_shape(h.shape, g.shape)):
                continue  # a cat is computed at its own shape, in a pointwise kernel
            if not self._within_bound(g, h):
                continue
            for n, m in h.members.items():
                if m.branch < 0:
                    m.level = level
                m.var = f"v{n.name}"
                g.members[n] = m
                self.group_of[n] = g
            g.cats.update(h.cats)
            g.members = dict(sorted(g.members.items(), key=lambda kv: self.order[kv[0]]))
            h.members = {}

    def _external_inputs(self, g: Group) -> set:
        """The tensors `g` reads that it does not compute."""
        return {x for n in g.members for x in n.all_input_nodes
                if x not in g.members and not _is_scalar_input(x)}

    def _within_bound(self, g: Group, *added) -> bool:
        """Whether `g` with the nodes `added` (or the members of the groups `added`) keeps its
        kernel's parameters within _GROUP_PARAMS (see _param_count)."""
        return self._param_count(g, *added) <= _GROUP_PARAMS

    def _param_count(self, g: Group, *added) -> int:
        """The parameters of `g`'s kernel with `added` in it, as the partition counts them:
        each tensor or scalar it reads from outside, and each member that a node outside it
        reads, or may read (a user not placed yet)."""
        if len(added) == 1 and isinstance(added[0], fx.Node):
            # One node more: from the group's running counts, so that a long chain is placed
            # in linear time (both sets stay about the bound's size).
            n = added[0]
            reads, outs = self._counts(g)
            new_reads = {x for x in n.all_input_nodes if x not in g.members} - reads
            outside = lambda m: any(u is not n and u not in g.members for u in m.users)
            return (len(reads) - (n in reads) + len(new_reads)
                    + sum(map(outside, outs)) + outside(n))
        members = set(g.members)
        for a in added:
            members.update(a.members if isinstance(a, Group) else (a,))
        reads, outs = _reads_and_outs(members)
        return len(reads) + len(outs)

    @staticmethod
    def _counts(g: Group):
        """(reads, outs) of `g` (see Group), counted afresh where members joined since."""
        if g.counted != len(g.members):
            g.reads, g.outs = _reads_and_outs(g.members)
            g.counted = len(g.members)
        return g.reads, g.outs

    def _merge_siblings(self):
        """Pointwise groups of one shape that read a common tensor and do not depend on each
        other (the rotary embeddings of q and of k, both reading cos and sin) become one
        kernel: one launch instead of two, and the common tensor loaded once a position. A
        group that nothing outside reads is left alone (it stays aten's dead code)."""
        def live(g):
            return bool(g.members) and not g.row and any(
                u not in g.members for n in g.members for u in n.users)
        for g in self.groups:
            if not live(g):
                continue
            reads_g = self._external_inputs(g)
            for h in self.groups:
                if h.index <= g.index or not live(h) or not _same_shape(h.shape, g.shape):
                    continue
                reads_h = self._external_inputs(h)
                if not reads_g & reads_h:
                    continue
                if any(self._depends_on_group(x, g) for x in reads_h) or \
                        any(self._depends_on_group(x, h) for x in reads_g) or \
                        not self._within_bound(g, h):
                    continue
                for n, m in list(g.members.items()) + list(h.members.items()):
                    m.var = f"v{n.name}"  # (emit numbers them again in graph order)
                    g.members[n] = m
                    self.group_of[n] = g
                g.cats.update(h.cats)
                g.members = dict(sorted(g.members.items(), key=lambda kv: self.order[kv[0]]))
                h.members, h.cats = {}, {}
                reads_g |= reads_h  # (neither read the other's members)

    # -- dependencies -----------------------------------------------------------------------
    def _depends_on_group(self, node, group: Group) -> bool:
        """Whether `node` (outside `group`) depends on a member of `group`: joining would close
        a cycle. Groups run whole, so a member of another group depends on everything its
        group does."""
        first = min(self.order[m] for m in group.members)
        seen, stack = set(), [node]
        while stack:
            n = stack.pop()
            if n in seen or not isinstance(n, fx.Node) or self.order.get(n, -1) < first:
                continue
            seen.add(n)
            if n in group.members:
                return True
            g = self.group_of.get(n)
            sources = g.members if g is not None else [n]
            for s in sources:
                stack.extend(x for x in s.all_input_nodes if x not in seen)
        return False

    # -- placement ---------------------------------------------------------------------------
    def _place(self, node):
        val = _val(node)
        if not isinstance(val, torch.Tensor) or not _fusable_device(val) or \
                not _supported_dtype(val.dtype) or val.dim() == 0:
            return
        red = _reduction(node)
        if red is not None:
            self._place_reduction(node, *red)
            return
        if node.target in _VIEW_OPS:
            self._place_row_view(node)
            return
        if node.target is aten.cat.default:
            self._place_cat(node)
            return
        if not _pointwise(node):
            return
        operands, _ = _operands(node)
        for o in operands:
            if isinstance(o, fx.Node) and not (_is_scalar_input(o) or self._readable(o)):
                return
        tried = []
        for o in operands:
            g = self.group_of.get(o) if isinstance(o, fx.Node) else None
            if g is None or g in tried:
                continue
            tried.append(g)
            level = g.level_of(val.shape)
            if level is not None and self._fits(node, operands, g, level):
                self._add(g, node, level)
                return
        if not all(_broadcasts_to(_val(o).shape, val.shape) for o in operands
                   if isinstance(o, fx.Node) and not _is_scalar_input(o)):
            return
        g = Group(len(self.groups), tuple(val.shape))
        self.groups.append(g)
        self._add(g, node, "e")

    def _readable(self, node) -> bool:
        v = _val(node)
        return isinstance(v, torch.Tensor) and _fusable_device(v) and _supported_dtype(v.dtype)

    def _fits(self, node, operands, g: Group, level: str) -> bool:
        for o in operands:
            if not isinstance(o, fx.Node) or _is_scalar_input(o):
                continue
            m = g.members.get(o)
            if m is not None:
                if level == "e" and m.level not in ("e", "keep"):
                    return False
                if level != "e" and m.level != level:
                    return False
                continue
            if not _broadcasts_to(_val(o).shape, g.level_shape(level)):
                return False
            if self._depends_on_group(o, g):
                return False
        return self._within_bound(g, node)

    def _place_reduction(self, node, x, keepdim):
        level = "keep" if keepdim else "drop"
        g = self.group_of.get(x)
        if g is not None and not g.cats and g.members[x].level == "e" and \
                _same_shape(_val(x).shape, g.shape) and self._within_bound(g, node):
            g.row = True
            self._add(g, node, level)
            return
        if not self._readable(x):
            return
        g = Group(len(self.groups), tuple(_val(x).shape), row=True)
        self.groups.append(g)
        self._add(g, node, level)

    def _place_cat(self, node):
        """A cat along the last dimension of operands that all have the output's dtype and
        static sizes along it. An operand computed by a pointwise group that nothing else
        reads is computed inside the cat's branch (the rotary embedding's rotate-half: a neg
        of one slice, then the cat); any other operand is loaded where its branch needs it."""
        val = _val(node)
        tensors = node.args[0]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        rank = val.dim()
        if rank == 0 or len(tensors) < 2 or dim % rank != rank - 1:
            return
        vals = [_val(t) for t in tensors]
        if any(not isinstance(v, torch.Tensor) or v.dim() != rank or v.dtype != val.dtype or
               not isinstance(v.shape[-1], int) or v.shape[-1] < 1 or
               not _same_shape(v.shape[:-1], val.shape[:-1]) for v in vals):
            return
        absorbed = []
        for t in tensors:
            h = self.group_of.get(t)
            # An operand that appears twice is computed once, outside, and loaded by each.
            if h is not None and h not in absorbed and tensors.count(t) == 1 and \
                    not h.row and not h.cats and \
                    _same_shape(h.shape, _val(t).shape) and h.members[t].level == "e" and \
                    all(u in h.members or u is node for n in h.members for u in n.users):
                absorbed.append(h)
            elif not self._readable(t):
                return
            else:
                absorbed.append(None)
        g = Group(len(self.groups), tuple(val.shape))
        if not self._within_bound(g, node, *filter(None, absorbed)):
            # Loaded instead of computed in their branches: each operand one parameter.
            absorbed = [None] * len(absorbed)
            if not all(self._readable(t) for t in tensors) or not self._within_bound(g, node):
                return
        self.groups.append(g)
        for k, h in enumerate(absorbed):
            if h is None:
                continue
            for n, m in h.members.items():
                m.branch, m.var = k, f"v{n.name}"
                g.members[n] = m
                self.group_of[n] = g
            h.members = {}
        g.cats[node] = _Cat(list(tensors), [v.shape[-1] for v in vals])
        self._add(g, node, "e")

    def _place_row_view(self, node):
        """A view that only adds or drops the reduced dimension of a row value stays in the
        group, as the same value in the other form."""
        src = node.args[0]
        g = self.group_of.get(src)
        if g is None or g.members[src].level not in ("keep", "drop"):
            return
        target = "keep" if g.members[src].level == "drop" else "drop"
        if _same_shape(_val(node).shape, g.level_shape(target)) and self._within_bound(g, node):
            self._add(g, node, target, alias=g.members[src].var)

    def _add(self, g: Group, node, level, alias=None):
        dtype = _val(node).dtype
        var = alias or f"v{len(g.members)}"
        g.members[node] = _Member(node, level, ops.COMPUTE[dtype], var)
        self.group_of[node] = g
        if g.counted == len(g.members) - 1:  # the running counts, one node on
            g.reads.discard(node)
            g.reads.update(x for x in node.all_input_nodes if x not in g.members)
            g.outs = {m for m in g.outs if any(u not in g.members for u in m.users)}
            if any(u not in g.members for u in node.users):
                g.outs.add(node)
            g.counted += 1


# -- code generation -------------------------------------------------------------------------

@dataclass
class _Input:
    node: fx.Node
    level: str         # "e", "keep" (row values, rank-R view), "b" (a cat branch's) or "scalar"
    name: str
    dtype: object = None
    unsqueeze: bool = False   # a row input in the drop form: viewed with a trailing 1
    kind: str = ""            # scalar: "double" or "long long"
    last: int = 0             # a cat branch's input: its branch's size along the last dimension
    unit: bool = False        # a cat branch's input whose last stride is 1 in the graph


class KernelPlan:
    """What the generated kernel of one group takes and gives, and how to launch it."""

    def __init__(self, group: Group, name: str):
        self.group, self.name = group, name
        # The kernel it launches: its own, or an earlier group's whose text is the same but for
        # the name (generate).
        self.kernel = name
        self.inputs: list = []       # _Input
        self.outputs: list = []      # (member, dtype, stride order or None)
        self.shape_recipe: list = [] # per dim of S: int, or (input index, dim)
        self.lines: list = []
        self.runs = False            # a cj::for_each_run kernel: launched over RUN-element runs
        # The order in which the kernel walks S's dimensions, outermost first, where it is not
        # S's own: its outputs' common memory order (channels-last), so that runs lie along
        # the dimension of stride 1. The launch permutes every view by it.
        self.perm = None
        # A run kernel's Across (cj::for_each_run): the dimension, in the walk's order, that
        # consecutive threads' runs differ in first; None for row-major order.
        self.across = None


class _Emitter:
    """Writes the kernel of one group."""

    def __init__(self, group: Group, name: str, graph_users):
        self.g = group
        self.plan = KernelPlan(group, name)
        self.inputs: dict = {}
        self.graph_users = graph_users
        self.rank = len(group.shape)
        # Loads of inputs in the current loop body (each input read once per index) and the
        # definitions not yet written.
        self.scope = 0
        self.loaded: dict = {}
        self.pending: list = []
        self.mode = "unravel"      # how elements are addressed: see _element
        self.row_bases: list = []  # arrays whose row base offset the row loop computes
        self.run_arrays: list = [] # arrays a run or register pass loads before its lane loop
        self.run_scalars: list = []  # arrays constant along runs: one element loaded a run
        self.branch = None         # (_Cat, k) while writing branch k of a cat
        self.cat_position = "cj_c"  # what a cat's guards and select compare: see _cat_definition
        self.branch_arrays: list = []  # cat branches' inputs, addressed from the run's row
        self.branch_runs: list = []    # (array, storage type, guard, branch start): _branch_run

    def new_scope(self):
        self.scope += 1
        self.loaded = {}

    # -- operands ------------------------------------------------------------------------------
    def _input(self, node, level) -> _Input:
        if _is_scalar_input(node):
            key = (node, "scalar")
            if key not in self.inputs:
                v = _val(node)
                floating = isinstance(v, (float, torch.SymFloat)) or (
                    isinstance(v, torch.Tensor) and v.is_floating_point())
                self.inputs[key] = _Input(node, "scalar", f"s{len(self.inputs)}",
                                          kind="double" if floating else "long long")
            return self.inputs[key]
        lv = "e" if level == "e" else "keep"
        key = (node, lv)
        if key not in self.inputs:
            v = _val(node)
            inp = _Input(node, lv, f"in{len(self.inputs)}", dtype=v.dtype)
            if lv == "keep" and self.g.row and _same_shape(v.shape, self.g.drop_shape()) and \
                    not _same_shape(v.shape, self.g.keep_shape()):
                inp.unsqueeze = True
            self.inputs[key] = inp
        return self.inputs[key]

    def operand(self, o, level) -> tuple:
        """(C++ expression, compute type) of an operand at `level`."""
        if not isinstance(o, fx.Node):
            if isinstance(o, bool):
                return ("true" if o else "false"), "bool"
            if isinstance(o, int):
                return f"{o}LL", "long long"
            return ops.literal(o, "double"), "double"
        m = self.g.members.get(o)
        if m is not None:
            return self._member_value(m), m.ctype
        if self.branch is not None and not _is_scalar_input(o):
            inp = self._branch_input(o)
        else:
            inp = self._input(o, level)
        if inp.level == "scalar":
            return inp.name, inp.kind
        ct = ops.COMPUTE[inp.dtype]
        index = {"e": "cj_i", "b": "cj_c"}.get(inp.level, "cj_row")
        if index == "cj_i" and self.mode == "run" and \
                _constant_along_runs(o, self.rank, self._last_dim()):
            index = "cj_s"  # one load a run (_run_body)
        var = self.loaded.get((inp.name, index))
        if var is None:
            var = f"{inp.name}_{self.scope}"
            self.loaded[(inp.name, index)] = var
            run = self._branch_run(inp) if index == "cj_c" else None
            if run is not None:
                value = f"static_cast<{ct}>({run}[cj_j])"
            else:
                value = f"static_cast<{ct}>({self._element(inp.name, index)})"
            if index == "cj_c" and run is None:  # read only where the lane is in the branch
                value = f"{self._branch_guard()} ? {value} : static_cast<{ct}>(0)"
            self.pending.append(f"const {ct} {var} = {value};")
        return var, ct

    def _branch_guard(self) -> str:
        """Whether the lane is in the current cat branch. By the run's start where the cat is
        whole runs (every position is below the row's end, so the first branch needs no lower
        bound and the last no upper one), by the lane's position otherwise."""
        cat, k = self.branch
        start, end = cat.starts[k], cat.starts[k] + cat.sizes[k]
        pos = self.cat_position
        if pos == "cj_c":
            return f"static_cast<unsigned long long>(cj_c - {start}LL) < {cat.sizes[k]}ULL"
        bounds = ([f"{pos} >= {start}LL"] if k > 0 else []) + \
            ([f"{pos} < {end}LL"] if k < len(cat.sizes) - 1 else [])
        return "(" + " && ".join(bounds) + ")" if bounds else "true"

    def _branch_run(self, inp: _Input):
        """The name of the run a cat branch's input is read from, loaded whole before the lane
        loop (one vector access, predicated by the branch's guard), where the cat is whole
        runs (so a run lies in one branch and starts at a multiple of RUN from the branch's
        start) and the input's view has last stride 1 and other strides multiples of RUN in
        the graph (so the run is aligned); None where the lanes load it one by one."""
        cat, k = self.branch
        if self.cat_position == "cj_c" or not inp.unit or self.mode != "run":
            return None
        v = _val(inp.node)
        shape = tuple(self.g.shape[:-1]) + (cat.sizes[k],)
        if not self._aligned_view(v, shape):
            return None
        if inp.name not in self.branch_arrays:
            self.branch_arrays.append(inp.name)
        name = f"{inp.name}_br"
        if all(r[0] != inp.name for r in self.branch_runs):
            self.branch_runs.append((inp.name, ops.STORAGE[inp.dtype], self._branch_guard(),
                                     cat.starts[k]))
        return name

    def _branch_input(self, o) -> _Input:
        """A tensor read inside branch k of a cat: an input of its own, expanded to the
        branch's shape when launched."""
        cat, k = self.branch
        key = (o, "b", id(cat), k)
        if key not in self.inputs:
            v = _val(o)
            # A stride the graph knows as a number holds whenever it runs (Dynamo guards the
            # inputs' strides, aten's meta functions give the others), so its multiply goes.
            unit = v.dim() > 0 and type(v.stride(-1)) is int and v.stride(-1) == 1 and \
                _same(v.shape[-1], cat.sizes[k])
            self.inputs[key] = _Input(o, "b", f"in{len(self.inputs)}", dtype=v.dtype,
                                      last=cat.sizes[k], unit=unit)
        return self.inputs[key]

    def _cat_definition(self, m: _Member, indent: str) -> str:
        """A cat's value at one lane, without branches: every branch computes its operand from
        loads guarded by the lane's position (a load outside its branch reads nothing and
        gives 0), and the position selects one (a lane past the row's end, which is never
        stored, gets 0). Guarded loads compile to predicated loads that the lane loop issues
        together; a branch per lane would wait for each load before the next."""
        cat = self.g.cats[m.node]
        # Where every branch starts and ends at a multiple of RUN, a run lies in one branch:
        # the run's start decides for all its lanes, and the guards are the same at every lane
        # (fewer registers than a guard per lane).
        whole = self.mode == "run" and all(size % RUN == 0 for size in cat.sizes)
        position = f"cj_at[{self.rank - 1}]" if whole else "cj_c"
        enclosing = self.cat_position
        lines = [indent + p for p in self._take_pending()]
        lines += [f"{indent}{m.ctype} {m.var};", f"{indent}{{"]
        position_line = len(lines)
        outer = self.loaded
        inner = indent + "    "
        for k, t in enumerate(cat.operands):
            # Each branch in a block of its own: members it shares with another are defined
            # once in each.
            lines += [f"{indent}  {m.ctype} {m.var}_b{k};", f"{indent}  {{"]
            self.branch = (cat, k)
            self.cat_position = position  # (a cat inside the branch sets its own)
            self.new_scope()
            for b in self._closure([t], self.g.members.values(), branch=k):
                lines.append(self._define(b, inner))
            value, _ = self.operand(t, "e")
            lines += [inner + p for p in self._take_pending()]
            lines += [f"{inner}{m.var}_b{k} = static_cast<{m.ctype}>({value});", f"{indent}  }}"]
        # Whole runs: no lane is past the row's end, so the last branch is the default.
        last = len(cat.operands) - 1
        select = f"{m.var}_b{last}" if whole else f"static_cast<{m.ctype}>(0)"
        for k in reversed(range(last if whole else last + 1)):
            select = f"{position} < {cat.starts[k] + cat.sizes[k]}LL ? {m.var}_b{k} : {select}"
        self.branch = None
        self.cat_position = enclosing
        self.loaded = outer
        lines += [f"{indent}  {m.var} = {select};", f"{indent}}}"]
        if any("cj_c" in line for line in lines[position_line:]):  # (runs loaded whole need none)
            lines.insert(position_line, f"{indent}  const long long cj_c = cj_at[{self.rank - 1}] + cj_j;")
        return "\n".join(lines)

    def _member_value(self, m: _Member) -> str:
        """A member's value where it is used: element values of a register pass are arrays
        indexed by the lane."""
        if self.mode == "registers" and m.level == "e":
            return f"{m.var}[cj_j]"
        return m.var

    def _row_base(self, array: str) -> None:
        """Has the row loop compute `array`'s row base offset and last stride."""
        if array not in self.row_bases:
            self.row_bases.append(array)

    def _element(self, array: str, index: str) -> str:
        """The element of `array` at the loop's position (index "cj_i"), at the row's
        (index "cj_row", row values) or at a cat branch's (index "cj_c", the lane's position
        less the branch's start, from the run's row offset of the array): a lane of the run loaded before the lane loop (run
        kernels and row kernels' register pass), through the row's base offset and the last
        dimension's stride (the row kernels' streaming pass) or the coordinates unravelled once
        per position (0-d kernels), so that no array divides its own index; a parameter of the
        lambda in cj::elementwise kernels."""
        if index == "cj_row":
            return f"{array}.data()[{array}.flat_offset(cj_row)]"
        if index == "cj_c":  # inside a cat's branch: from the run's row, shifted by its start
            if array not in self.branch_arrays:
                self.branch_arrays.append(array)
            cat, k = self.branch
            unit = any(i.unit for i in self.inputs.values() if i.name == array)
            step = "" if unit else f" * {array}.stride({self.rank - 1})"
            return f"{array}.data()[{array}_cb + (cj_c - {cat.starts[k]}LL){step}]"
        if index == "cj_s":  # the same element at every lane of the run, loaded once
            if array not in self.run_scalars:
                self.run_scalars.append(array)
            return f"{array}_s"
        if self.mode == "lambda":
            return f"{array}_p"
        if self.mode in ("run", "registers"):
            if array not in self.run_arrays:
                self.run_arrays.append(array)
            if self.mode == "run":
                return f"{array}_r[cj_j]"
            self._row_base(array)
            return f"{array}_r[cj_j / {RUN}][cj_j % {RUN}]"
        if self.mode == "row":
            self._row_base(array)
            return f"{array}.data()[{array}_base + cj_c * {array}_step]"
        return f"{array}.data()[{array}.offset_at(cj_i, cj_at)]"

    def expression(self, m: _Member) -> str:
        node = m.node
        t = node.target
        ct = m.ctype
        if node.target in _VIEW_OPS:
            raise AssertionError("aliases have no expression")
        operands, consts = _operands(node)
        vals = [self.operand(o, m.level) for o in operands]

        def as_(v, c):
            return v[0] if v[1] == c else f"static_cast<{c}>({v[0]})"

        if t in ops.CASTS:
            # A 16-bit float value is rounded to its dtype where the program converts it, as
            # eager stores it between operations (it is kept in float inside the kernel).
            src = operands[0]
            if isinstance(src, fx.Node) and src in self.g.members and \
                    _val(src).dtype in ops.LOW_PRECISION:
                st = ops.STORAGE[_val(src).dtype]
                return as_((f"static_cast<float>(static_cast<{st}>({vals[0][0]}))", "float"), ct)
            return as_(vals[0], ct)
        if t in ops.UNARY:
            return ops.UNARY[t](as_(vals[0], ct))
        if t in ops.COMPARE:
            c = ops.common_ctype([v[1] for v in vals])
            a, b = as_(vals[0], c), as_(vals[1], c)
            if t in (aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default):
                a, b = f"static_cast<bool>({a})", f"static_cast<bool>({b})"
            return f"({a} {ops.COMPARE[t]} {b})"
        if t is aten.where.self:
            return (f"({as_(vals[0], 'bool')} ? {as_(vals[1], ct)} : {as_(vals[2], ct)})")
        if t is aten.div.Tensor_mode:
            a, b = as_(vals[0], ct), as_(vals[1], ct)
            mode = consts["rounding_mode"]
            if mode == "floor":
                return f"cj::op::floordiv({a}, {b})"
            if mode == "trunc":
                return f"cj::op::trunc({a} / {b})" if ct in ops.FLOATING else f"({a} / {b})"
            return f"({a} / {b})"
        if t is aten.pow.Scalar:
            return f"cj::op::pow({as_(vals[0], ct)}, {as_(vals[1], ct)})"
        if t is aten.pow.Tensor_Scalar and ct in ops.FLOATING:
            special = _pow_by_constant(as_(vals[0], ct), operands[1], ct)
            if special is not None:
                return special
        a, b = as_(vals[0], ct), as_(vals[1], ct)
        alpha = consts.get("alpha", 1)
        if t in (aten.add.Tensor, aten.sub.Tensor) and alpha != 1:
            b = f"({ops.literal(alpha, ct)} * {b})"
        return ops.BINARY[t](a, b)

    # -- the kernel ----------------------------------------------------------------------------
    def emit(self):
        g, plan = self.g, self.plan
        members = list(g.members.values())
        # Values are numbered in graph order, so that groups computing the same thing have the
        # same text whatever their nodes were called (merged groups name theirs after nodes);
        # members that share a value (aliases) keep sharing it.
        numbered: dict = {}
        for m in members:
            m.var = numbered.setdefault(m.var, f"v{len(numbered)}")
        outs = [m for m in members if any(u not in g.members for u in self.graph_users[m.node])]
        if not outs:
            raise _Unfusable("nothing the group computes is read (dead code stays as it is)")
        # Stages: a reduction runs after the row values its input needs (members are in graph
        # order, so each one's operands have their stage already).
        for m in members:
            m.stage = max((g.members[o].stage for o in m.node.all_input_nodes if o in g.members),
                          default=0) + (m.node.target in ops.REDUCTIONS)
        reductions = [m for m in members if m.node.target in ops.REDUCTIONS]
        for m in outs:
            v = _val(m.node)
            order = None
            if m.level == "e" and not v.is_contiguous():
                order = tuple(sorted(range(v.dim()), key=lambda d: (-_hint(v.stride()[d]), d)))
                if not _dense(v, order):
                    order = None
            plan.outputs.append((m, v.dtype, order))
        orders = {o for m, _, o in plan.outputs if m.level == "e"}
        if not g.row and not g.cats and len(orders) == 1 and None not in orders:
            plan.perm = orders.pop()
        body = self._row_body(members, reductions) if g.row else self._pointwise_body(members)
        self._shape_recipe()
        if not any(i.level != "scalar" for i in self.inputs.values()):
            raise _Unfusable("no tensor input gives the device")
        params = []
        for i, (m, dtype, _) in enumerate(plan.outputs):
            params.append(f"cj::Array<{ops.STORAGE[dtype]}, {self.rank}> out{i}")
        for inp in self.inputs.values():
            if inp.level != "scalar":
                params.append(f"cj::Array<const {ops.STORAGE[inp.dtype]}, {self.rank}> {inp.name}")
        for inp in self.inputs.values():
            if inp.level == "scalar":
                params.append(f"{inp.kind} {inp.name}")
        if g.row:
            params += ["long long cj_rows", "long long cj_cols"]
        elif not plan.runs:
            params.append("long long cj_n")
        if len(params) > _C.max_kernel_params:
            raise _Unfusable(f"{len(params)} parameters, over the plugin's "
                             f"{_C.max_kernel_params}")
        # Row kernels launch up to _ROW_THREADS_MAX threads a block: the bound keeps the
        # register pass's arrays within what a block that size may use.
        bounds = f"__launch_bounds__({_ROW_THREADS_MAX}) " if g.row else ""
        plan.lines = [f"__global__ void {bounds}{plan.name}({', '.join(params)}) {{"] + body + ["}"]
        return plan

    def _closure(self, targets, members, branch: int = -1):
        """The element-level members `targets` need, in graph order: outside any cat's
        branches, or (branch k) those computed inside branch k."""
        need = set()
        stack = list(targets)
        while stack:
            n = stack.pop()
            m = self.g.members.get(n)
            if m is None or n in need or m.level != "e" or m.branch != branch:
                continue
            need.add(n)
            stack.extend(n.all_input_nodes)
        return [m for m in members if m.node in need]

    def _define(self, m, indent):
        if m.node in self.g.cats:
            return self._cat_definition(m, indent)
        if self.mode == "registers" and m.level == "e":
            line = f"{indent}{m.var}[cj_j] = {self.expression(m)};"
        else:
            line = f"{indent}const {m.ctype} {m.var} = {self.expression(m)};"
        return "\n".join([indent + p for p in self._take_pending()] + [line])

    def _take_pending(self):
        out, self.pending = self.pending, []
        return out

    def _store(self, i, m, dtype, index, indent):
        st = ops.STORAGE[dtype]
        if self.mode == "run":
            target = f"out{i}_r[cj_j]"
        elif self.mode == "registers" and index == "cj_i":
            target = f"out{i}_r[cj_j / {RUN}][cj_j % {RUN}]"
        else:
            target = self._element(f"out{i}", index)
        return f"{indent}{target} = static_cast<{st}>({self._member_value(m)});"

    def _pointwise_body(self, members):
        plan = self.plan
        if self._vectorizable():
            return self._elementwise_body(members)
        if self.rank:
            return self._run_body(members)
        lines = ["  cj::for_each(cj_n, [&](long long cj_i) {",
                 f"    long long cj_at[{self.rank}];",
                 "    cj::unravel(out0, cj_i, cj_at);"]
        self.new_scope()
        for m in members:
            lines.append(self._define(m, "    "))
        for i, (m, dtype, _) in enumerate(plan.outputs):
            lines.append(self._store(i, m, dtype, "cj_i", "    "))
        lines.append("  });")
        return lines

    def _run_body(self, members):
        """cj::for_each_run: each thread takes RUN consecutive positions along the last
        dimension, unravels the run's start once, loads each input's run (one vector access
        where its last stride is 1 and the address aligned, one load where it is 0), computes
        the lanes and stores each output's run."""
        plan, rank = self.plan, self.rank
        plan.runs = True
        self.mode = "run"
        # Values that are the same at every lane of a run (batch norm's per-channel scale and
        # shift over W) are computed once a run, before the lane loop.
        invariant = self._run_invariants(members)
        self.new_scope()
        hoisted = [self._define(m, "    ") for m in members if m.node in invariant]
        self.new_scope()
        body = []
        for m in members:
            # A cat's branch members are written inside its branches.
            if m.branch < 0 and m.node not in invariant:
                body.append(self._define(m, "      "))
        for i, (m, dtype, _) in enumerate(plan.outputs):
            body.append(self._store(i, m, dtype, "cj_i", "      "))
        plan.across = self._run_across()
        across = "" if plan.across is None else f", {plan.across}"
        lines = [f"  cj::for_each_run<{RUN}{across}>(out0, [&](long long cj_i, "
                 f"const long long (&cj_at)[{rank}], int cj_len) {{"]
        for a in self.branch_arrays:
            # The row's offset (offset() computes in 32 bits where the layout allows).
            coords = "".join(f"cj_at[{d}], " for d in range(rank - 1))
            lines.append(f"    const long long {a}_cb = {a}.offset({coords}0);")
        for a, st, guard, start in self.branch_runs:
            # Only the branch the run lies in loads (the others' values are not selected).
            lines += [f"    cj::Vec<{st}, {RUN}> {a}_br{{}};",
                      f"    if ({guard}) {a}_br = {a}.template load_aligned_run<{RUN}>("
                      f"{a}_cb + cj_at[{rank - 1}] - {start}LL);"]
        aligned = self._aligned_runs()
        for a in self.run_arrays:
            if a in aligned:
                lines.append(f"    const auto {a}_r = {a}.template load_aligned_run<{RUN}>("
                             f"{a}.offset_at(cj_i, cj_at));")
            else:
                lines.append(f"    const auto {a}_r = {a}.template load_run<{RUN}>("
                             f"{a}.offset_at(cj_i, cj_at), cj_len);")
        for a in self.run_scalars:
            lines.append(f"    const auto {a}_s = {a}.data()[{a}.offset_at(cj_i, cj_at)];")
        lines += hoisted
        for i, (m, dtype, _) in enumerate(plan.outputs):
            lines.append(f"    cj::Vec<{ops.STORAGE[dtype]}, {RUN}> out{i}_r;")
        lines += ["#pragma unroll", f"    for (int cj_j = 0; cj_j < {RUN}; ++cj_j) {{"] + body + ["    }"]
        for i in range(len(plan.outputs)):
            if f"out{i}" in aligned:
                lines.append(f"    out{i}.template store_aligned_run<{RUN}>(out{i}.offset_at(cj_i, cj_at), "
                             f"out{i}_r);")
            else:
                lines.append(f"    out{i}.template store_run<{RUN}>(out{i}.offset_at(cj_i, cj_at), "
                             f"out{i}_r, cj_len);")
        lines.append("  });")
        return lines

    def _aligned_runs(self) -> set:
        """The arrays of a run kernel whose every run is whole, with last stride 1 and an offset
        that is a multiple of RUN, by the graph's sizes and strides where they are numbers (they
        hold whenever the graph runs: Dynamo guards its inputs' strides, aten's meta functions
        give the others): the last size a multiple of RUN, and each input's view (expanded to
        the iteration shape) of last stride 1 and other strides multiples of RUN; outputs
        row-major. Their runs move as vectors (load_aligned_run), where the data pointer's
        alignment, a key bit, allows."""
        shape, perm = self.g.shape, self.plan.perm
        if not _multiple_of(shape[self._last_dim()], RUN):
            return set()
        aligned = {f"out{i}" for i, (m, _, order) in enumerate(self.plan.outputs)
                   if m.level == "e" and order == perm}
        for inp in self.inputs.values():
            if inp.level == "e" and inp.name in self.run_arrays and \
                    self._aligned_view(_val(inp.node), shape, perm):
                aligned.add(inp.name)
        return aligned

    def _last_dim(self) -> int:
        """The dimension of S along which runs lie: the last one the kernel walks."""
        return self.plan.perm[-1] if self.plan.perm else self.rank - 1

    def _run_across(self):
        """The dimension (in the walk's order) for consecutive threads' runs to differ in first,
        or None: where a tensor input that the runs read element by element has stride 1 along
        another dimension than the runs' (a channels-last tensor in a kernel that walks NCHW to
        write NCHW outputs), runs that differ in that dimension make a warp's loads one
        contiguous span. The dimension most such inputs have stride 1 along, by the graph's
        numbers; ties go to the later dimension."""
        shape, perm, last = self.g.shape, self.plan.perm, self._last_dim()
        votes: dict = {}
        for inp in self.inputs.values():
            if inp.level != "e" or inp.name not in self.run_arrays:
                continue
            v = _val(inp.node)
            lead = len(shape) - v.dim()
            strides = {d: v.stride(d - lead) for d in range(lead, len(shape))
                       if not _same(v.shape[d - lead], 1)}
            along = strides.get(last, 0)
            if type(along) is not int or along in (0, 1):
                continue  # read along the run: vectors or one value a run
            for d, st in strides.items():
                if type(st) is int and st == 1 and d != last and \
                        isinstance(shape[d], int) and shape[d] > 1:
                    votes[d] = votes.get(d, 0) + 1
        if not votes:
            return None
        d = max(votes, key=lambda k: (votes[k], k))
        return perm.index(d) if perm else d

    @staticmethod
    def _aligned_view(v, shape, perm=None) -> bool:
        """Whether `v` expanded to `shape` (and permuted by `perm`, the walk's order) has last
        stride 1 and every other stride a multiple of RUN, by the graph's numbers (see
        _aligned_runs)."""
        lead = len(shape) - v.dim()
        strides = []
        for d in range(len(shape)):
            if d < lead or _same(v.shape[d - lead], 1):
                strides.append(0)  # expanded (or of size 1): the coordinate adds nothing
            else:
                strides.append(v.stride(d - lead))
        if perm:
            strides = [strides[d] for d in perm]
        return type(strides[-1]) is int and strides[-1] == 1 and all(
            _multiple_of(st, RUN) for st in strides[:-1])

    def _run_invariants(self, members) -> set:
        """The nodes of the members whose value is the same at every lane of a run: computed
        from numbers, scalar inputs and inputs of last size 1 (_constant_along_runs) alone."""
        invariant = set()
        for m in members:
            if m.level != "e" or m.branch >= 0 or m.node in self.g.cats or \
                    m.node.target in _VIEW_OPS:
                continue
            operands, _ = _operands(m.node)
            if operands is None:
                continue
            if all(not isinstance(o, fx.Node) or _is_scalar_input(o) or
                   o in invariant or
                   (o not in self.g.members and
                    _constant_along_runs(o, self.rank, self._last_dim())) for o in operands):
                invariant.add(m.node)
        return invariant

    def _vectorizable(self) -> bool:
        """One output, and every input read whole at the iteration shape and contiguous (dense
        in the walk's order, where it has one) in the traced program: cj::elementwise, whose
        16-byte vector loads and stores are used when the arrays' layouts allow it at run
        time."""
        perm = self.plan.perm
        if len(self.plan.outputs) != 1 or self.g.cats or (
                self.plan.outputs[0][2] is not None and perm is None):
            return False
        for n in {o for m in self.g.members for o in m.all_input_nodes} - set(self.g.members):
            if _is_scalar_input(n):
                continue
            v = _val(n)
            if not _same_shape(v.shape, self.g.shape) or not (
                    _dense(v, perm) if perm else v.is_contiguous()):
                return False
        return True

    def _elementwise_body(self, members):
        """out0 = f(inputs...) with cj::elementwise: the loads are the lambda's parameters."""
        self.mode = "lambda"
        self.new_scope()
        body = [self._define(m, "    ") for m in members]
        last = self.plan.outputs[0][0]
        tensors = [i for i in self.inputs.values() if i.level != "scalar"]
        params = ", ".join(f"const {ops.STORAGE[i.dtype]} {i.name}_p" for i in tensors)
        args = ", ".join(i.name for i in tensors)
        return ([f"  cj::elementwise(out0, [=]({params}) {{"] + body +
                [f"    return {last.var};", f"  }}, {args});"])

    def _row_body(self, members, reductions):
        """A block per row: the register pass where the row fits in the block's registers
        (ROW_LANES elements a thread), the streaming pass (each stage reads the row again)
        where it does not."""
        registers = self._row_pass(members, reductions, registers=True)
        streaming = self._row_pass(members, reductions, registers=False)
        lines = ["  for (long long cj_row = blockIdx.x; cj_row < cj_rows; cj_row += gridDim.x) {"]
        # Each array read or written per element starts its row at one offset and steps by its
        # last dimension's stride.
        lines += [f"    const long long {a}_base = {a}.flat_offset(cj_row * cj_cols), "
                  f"{a}_step = {a}.inner_stride();" for a in self.row_bases]
        lines.append(f"    if (cj_cols <= {ROW_LANES}LL * blockDim.x) {{")
        lines += _indented(registers)
        lines.append("    } else {")
        lines += _indented(streaming)
        lines += ["    }", "  }"]
        return lines

    def _row_pass(self, members, reductions, registers: bool):
        """One way through a row's stages: row values, then for each stage its reductions over
        the row's elements (block_reduce) and the row values that wait for them, then the
        element outputs and the row outputs."""
        plan = self.plan
        self.mode = "registers" if registers else "row"
        done = set()
        self.new_scope()
        row_scope = (self.scope, self.loaded)
        last = max((m.stage for m in members), default=0)
        lines = []
        element = [m for m in members if m.level == "e" and m.node.target not in _VIEW_OPS]
        element_outs = [(i, m, d) for i, (m, d, _) in enumerate(plan.outputs) if m.level == "e"]
        self.run_arrays = []

        def row_values(upto):
            self.scope, self.loaded = row_scope
            out = []
            for m in members:
                if m.level != "e" and m.node not in done and m.node.target not in ops.REDUCTIONS \
                        and m.stage <= upto and m.node.target not in _VIEW_OPS:
                    out.append(self._define(m, "    "))
                    done.add(m.node)
            return out

        def lanes(todo, tail):
            """The lane loop of the register pass: the element values `todo` (kept in arrays
            for later stages), then `tail`'s lines for each lane."""
            self.new_scope()
            out = ["#pragma unroll", f"    for (int cj_j = 0; cj_j < {ROW_LANES}; ++cj_j) {{"]
            for e in todo:
                out.append(self._define(e, "      "))
                done.add(e.node)
            out += tail()
            return out + ["    }"]

        def accumulate(here, indent):
            out = []
            for m in here:
                x, xt = self.operand(m.node.args[0], "e")
                out += [indent + p for p in self._take_pending()]
                comb = ops.REDUCTIONS[m.node.target][1].format(
                    a=f"{m.var}_acc", b=x if xt == m.ctype else f"static_cast<{m.ctype}>({x})")
                if registers:
                    out.append(f"{indent}if (cj_j % {RUN} < cj_len[cj_j / {RUN}]) {m.var}_acc = {comb};")
                else:
                    out.append(f"{indent}{m.var}_acc = {comb};")
            return out

        if registers:
            lines += [f"    long long cj_c[{ROW_RUNS}];",
                      f"    int cj_len[{ROW_RUNS}];",
                      "#pragma unroll",
                      f"    for (int cj_u = 0; cj_u < {ROW_RUNS}; ++cj_u) {{",
                      f"      cj_c[cj_u] = (static_cast<long long>(threadIdx.x) + cj_u * "
                      f"static_cast<long long>(blockDim.x)) * {RUN};",
                      "      const long long cj_left = cj_cols - cj_c[cj_u];",
                      f"      cj_len[cj_u] = cj_left >= {RUN} ? {RUN} : (cj_left > 0 ? static_cast<int>(cj_left) : 0);",
                      "    }"]
            lines += [f"    {m.ctype} {m.var}[{ROW_LANES}];" for m in element]
            loads_at = len(lines)
        lines += row_values(0)
        for s in range(1, last + 1):
            here = [m for m in reductions if m.stage == s]
            if not here:
                lines += row_values(s)
                continue
            for m in here:
                kind = ops.REDUCTIONS[m.node.target][0]
                lines.append(f"    {m.ctype} {m.var}_acc = {ops.reduction_init(kind, m.ctype)};")
            if registers:
                todo = [e for e in element if e.node not in done and e.stage < s]
                lines += lanes(todo, lambda: accumulate(here, "      "))
            else:
                lines.append("    for (long long cj_c = threadIdx.x; cj_c < cj_cols; cj_c += blockDim.x) {")
                self.new_scope()
                for e in self._closure([m.node.args[0] for m in here], members):
                    lines.append(self._define(e, "      "))
                lines += accumulate(here, "      ")
                lines.append("    }")
            for m in here:
                comb = ops.REDUCTIONS[m.node.target][1].format(a="cj_a", b="cj_b")
                value = (f"cj::block_reduce({m.var}_acc, []({m.ctype} cj_a, {m.ctype} cj_b) "
                         f"{{ return {comb}; }})")
                if m.node.target is aten.mean.dim:
                    value = f"{value} / static_cast<{m.ctype}>(cj_cols)"
                lines.append(f"    const {m.ctype} {m.var} = {value};")
                done.add(m.node)
            lines += row_values(s)
        if element_outs and registers:
            for i, m, d in element_outs:
                lines.append(f"    cj::Vec<{ops.STORAGE[d]}, {RUN}> out{i}_r[{ROW_RUNS}];")
            todo = [e for e in element if e.node not in done]
            lines += lanes(todo, lambda: [self._store(i, m, d, "cj_i", "      ")
                                          for i, m, d in element_outs])
            lines += ["#pragma unroll", f"    for (int cj_u = 0; cj_u < {ROW_RUNS}; ++cj_u) {{"]
            for i, m, d in element_outs:
                self._row_base(f"out{i}")
                lines.append(f"      out{i}.template store_run<{RUN}>(out{i}_base + cj_c[cj_u] * out{i}_step, "
                             f"out{i}_r[cj_u], cj_len[cj_u]);")
            lines.append("    }")
        elif element_outs:
            lines.append("    for (long long cj_c = threadIdx.x; cj_c < cj_cols; cj_c += blockDim.x) {")
            self.new_scope()
            for e in self._closure([m.node for _, m, _ in element_outs], members):
                lines.append(self._define(e, "      "))
            for i, m, d in element_outs:
                lines.append(self._store(i, m, d, "cj_i", "      "))
            lines.append("    }")
        row_outs = [(i, m, d) for i, (m, d, _) in enumerate(plan.outputs) if m.level != "e"]
        if row_outs:
            lines.append("    if (threadIdx.x == 0) {")
            for i, m, d in row_outs:
                lines.append(self._store(i, m, d, "cj_row", "      "))
            lines.append("    }")
        if registers:
            loads = []
            for a in self.run_arrays:
                st = ops.STORAGE[self._array_dtype(a)]
                loads += [f"    cj::Vec<{st}, {RUN}> {a}_r[{ROW_RUNS}];",
                          "#pragma unroll",
                          f"    for (int cj_u = 0; cj_u < {ROW_RUNS}; ++cj_u)",
                          f"      {a}_r[cj_u] = {a}.template load_run<{RUN}>({a}_base + cj_c[cj_u] * {a}_step, "
                          "cj_len[cj_u]);"]
            lines[loads_at:loads_at] = loads
        return lines

    def _array_dtype(self, array: str):
        for inp in self.inputs.values():
            if inp.name == array:
                return inp.dtype
        raise AssertionError(f"no input named {array}")

    def _shape_recipe(self):
        """How each size of S is read when the group runs: a constant, or a size of one of its
        inputs."""
        g, plan = self.g, self.plan
        tensors = [i for i in self.inputs.values() if i.level != "scalar"]
        plan.inputs = list(self.inputs.values())
        for d, size in enumerate(g.shape):
            if isinstance(size, int):
                plan.shape_recipe.append(size)
                continue
            found = None
            for inp in tensors:
                shape = _val(inp.node).shape
                if inp.level == "b":
                    target = tuple(g.shape[:-1]) + (inp.last,)
                elif inp.level == "e":
                    target = g.shape
                else:
                    target = g.level_shape("keep" if not inp.unsqueeze else "drop")
                off = len(target) - len(shape)
                if d - off >= 0 and d < len(target) and d - off < len(shape) and \
                        _same(shape[d - off], size):
                    found = (plan.inputs.index(inp), d - off)
                    break
            if found is None:
                raise _Unfusable(f"size {size} of dimension {d} is read from no input")
            plan.shape_recipe.append(found)


def _indented(lines):
    """Lines (some several joined by newlines) two spaces further in; pragmas stay put."""
    return ["\n".join(x if x.startswith("#") else "  " + x for x in line.split("\n"))
            for line in lines]


class _Unfusable(Exception):
    pass


def _dense(v, order) -> bool:
    """Whether strides are those of a dense tensor stored in dimension order `order`."""
    expected = 1
    for d in reversed(order):
        if _hint(v.shape[d]) != 1 and _hint(v.stride()[d]) != expected:
            return False
        expected *= _hint(v.shape[d])
    return True


# -- running ---------------------------------------------------------------------------------

_ROW_THREADS_MAX = 512


def _row_threads(cols: int) -> int:
    """Threads per row: a block per row, each thread taking up to ROW_LANES of its elements
    (the register pass), so that short rows (attention scores, hidden sizes) use one or two
    warps and little synchronization, and long rows still spread over the block."""
    t = 32
    while t < _ROW_THREADS_MAX and t * ROW_LANES < cols:
        t *= 2
    return t


class GroupLaunch:
    """Runs one group's kernel: reads S from its inputs, allocates the outputs, launches."""

    def __init__(self, kernel, plan: KernelPlan):
        self.kernel = kernel
        self.row = plan.group.row
        self.runs = plan.runs
        self.recipe = plan.shape_recipe
        # S itself when no size of it is read from an input.
        self.shape = (tuple(plan.shape_recipe)
                      if all(isinstance(r, int) for r in plan.shape_recipe) else None)
        # The tensor inputs, as (argument index, level, unsqueeze, dtype, last, kept, views),
        # and the argument indices of the scalars: the kernel takes the tensors, then the
        # scalars. The graph's own inputs (weights, statistics) and views of them are the same
        # memory call after call: their views as the kernel reads them are kept, one per input,
        # with what they were made from (`kept`, see _graph_input_view; None for other inputs).
        # An input that is static views of a graph input is given as that graph input (`reads`,
        # the node each argument comes from), and `views` makes it again where the kept view is
        # made, so the rewritten graph makes no view each call.
        sized = {r[0] for r in plan.shape_recipe if not isinstance(r, int)}
        self.tensor_inputs, self.scalar_inputs, self.reads = [], [], []
        for k, i in enumerate(plan.inputs):
            if i.level == "scalar":
                self.scalar_inputs.append(k)
                self.reads.append(i.node)
                continue
            root, views = _static_views(i.node) if k not in sized else (i.node, ())
            self.reads.append(root)
            self.tensor_inputs.append((k, i.level, i.unsqueeze, i.dtype, i.last,
                                       [] if _of_graph_input(i.node) else None, views))
        self.outputs = _output_forms(plan)
        self.perm = plan.perm
        self.across = plan.across  # the run kernel's Across (for inspection)
        self.name = self.__name__ = plan.name
        self.launch_forall = kernel.forall
        self.index = kernel.__getitem__
        # Launchers by configuration (the kernel's own cache is behind a compiling check).
        self.launchers: dict = {}

    def _remember(self, key, launcher):
        if len(self.launchers) < 64:  # sizes that keep changing are not all kept
            self.launchers[key] = launcher
        return launcher

    def __call__(self, *args):
        shape = self.shape or tuple(r if isinstance(r, int) else args[r[0]].shape[r[1]]
                                    for r in self.recipe)
        tensors = []
        for k, level, unsqueeze, dtype, last, kept, views in self.tensor_inputs:
            a = args[k]
            if a.dtype != dtype:
                # An aten operation whose result's dtype its meta function gets wrong (batch
                # norm's statistics): the value as the graph typed it.
                a = a.to(dtype)
            if kept is None:
                tensors.append(_input_view(a, level, unsqueeze, shape, last, self.perm))
            else:
                tensors.append(_graph_input_view(kept, a, level, unsqueeze, shape, last, views,
                                                 self.perm))
        scalars = [args[k].item() if isinstance(args[k], torch.Tensor) else args[k]
                   for k in self.scalar_inputs]
        device = a.device  # every group has a tensor input (_Emitter.emit)
        outs, views = _new_outputs(self.outputs, shape, device, self.perm)
        if self.perm:
            shape = tuple(shape[d] for d in self.perm)  # as the kernel walks it
        if self.row:
            # An empty last dimension still runs: its reductions are their initial values
            # (sum 0, mean NaN), as torch defines them.
            rows, cols = math.prod(shape[:-1]), shape[-1]
            if rows:
                config = ((min(rows, 2**31 - 1),), (_row_threads(cols),))
                launcher = self.launchers.get(config)
                if launcher is None:
                    launcher = self._remember(config, self.index(config))
                launcher(*views, *tensors, *scalars, rows, cols)
        else:
            numel = math.prod(shape)
            if numel:
                # Run kernels: a task per run of RUN elements along the last dimension.
                tasks = numel // shape[-1] * -(-shape[-1] // RUN) if self.runs else numel
                launcher = self.launchers.get(tasks)
                if launcher is None:
                    launcher = self._remember(tasks, self.launch_forall(tasks))
                launcher(*views, *tensors, *scalars, *(() if self.runs else (numel,)))
        return tuple(outs)


def _input_view(a, level: str, unsqueeze: bool, shape: tuple, last: int = 0, perm=None):
    """An input as the kernel reads it: an element input expanded to S, a row input (a trailing
    1 added to the drop form) expanded to S with the last size 1, a cat branch's input expanded
    to S with its branch's last size; permuted by `perm`, the kernel's walk (KernelPlan.perm)."""
    if unsqueeze:
        a = a.unsqueeze(-1)
    target = shape if level == "e" else shape[:-1] + (last if level == "b" else 1,)
    if a.shape != target:
        a = a.expand(target)
    return a if perm is None else a.permute(perm)


# The largest graph input (in elements) whose view a launch keeps between calls: weights,
# biases, statistics and position tables, never activations, whose memory the view would hold.
_KEPT_VIEW_MAX = 1 << 18


def _static_views(node) -> tuple:
    """(graph input, views) for a node that is view operations with constant arguments of one
    of the graph's inputs, a small one (its view is kept: _graph_input_view), the views as
    (function, arguments after the tensor, keyword arguments) in the order made; else
    (node, ()). `reshape`, which copies what it cannot view, is not one of them: a kept copy
    would not see the input's later writes."""
    views, n = [], node
    while (isinstance(n, fx.Node) and n.op == "call_function" and n.target in _VIEW_OPS
           and n.target is not aten.reshape.default):
        leaves: list = []
        fx.node.map_aggregate((n.args[1:], n.kwargs), leaves.append)
        if any(isinstance(x, (fx.Node, torch.SymInt)) for x in leaves):
            return node, ()
        # As the Tensor method where there is one: cheaper to call than the OpOverload.
        method = n.target in _METHODS and not n.kwargs
        views.append((getattr(torch.Tensor, _METHODS[n.target]) if method else n.target,
                      n.args[1:], n.kwargs))
        n = n.args[0]
    if not views or not (isinstance(n, fx.Node) and n.op == "placeholder"):
        return node, ()
    v = _val(n)
    numel = v.numel() if isinstance(v, torch.Tensor) else None
    if not isinstance(numel, int) or numel > _KEPT_VIEW_MAX:
        return node, ()
    return n, tuple(reversed(views))


def _replay_views(a, views):
    """`a` through the views _static_views found (the tensor a launch's kernel reads)."""
    for target, rest, kwargs in views:
        a = target(a, *rest, **kwargs)
    return a


def _of_graph_input(node) -> bool:
    """Whether `node` is one of the graph's inputs, or views of one (view operations only)."""
    while isinstance(node, fx.Node) and node.op == "call_function" and node.target in _VIEW_OPS:
        node = node.args[0]
    return isinstance(node, fx.Node) and node.op == "placeholder"


def _graph_input_view(kept: list, a, level: str, unsqueeze: bool, shape: tuple, last: int,
                      views=(), perm=None):
    """_input_view of one of the graph's inputs (or of a view of one, made anew each call; or,
    with `views`, of the view of `a` they make), made again only when the tensor it views, its
    data pointer, its layout or the launch's shape changed since the view in `kept` ([base,
    data pointer, sizes, strides, shape, view]) was made. The view shares the tensor's storage,
    so it sees what was written there since."""
    if kept:
        base = a if a._base is None else a._base
        if (kept[0] is base and kept[1] == a.data_ptr() and kept[2] == a.shape
                and kept[3] == a.stride() and kept[4] == shape):
            return kept[5]
    view = _input_view(_replay_views(a, views), level, unsqueeze, shape, last, perm)
    if view is not a:  # an input the kernel reads as it is needs nothing kept
        base = a if a._base is None else a._base
        if base.numel() <= _KEPT_VIEW_MAX:
            kept[:] = [base, a.data_ptr(), a.shape, a.stride(), shape, view]
    return view


def _new_outputs(outputs, shape: tuple, device, perm=None):
    """The outputs of a launch, (as the graph gets them, as the kernel writes them): element
    outputs of shape S, dense in the layout eager would give them (a dimension order, or
    row-major), written as they lie in memory where the kernel walks S in that order (`perm`);
    row outputs of one value per row in their keep or drop form, written through a view with
    a trailing 1."""
    outs, views = [], []
    for level, dtype, order, inverse in outputs:
        if level == "e":
            if order is None:
                o = torch.empty(shape, dtype=dtype, device=device)
                outs.append(o)
                views.append(o)
            else:
                dense = torch.empty([shape[d] for d in order], dtype=dtype, device=device)
                outs.append(dense.permute(inverse))
                views.append(dense if perm is not None else outs[-1])
        else:
            o = torch.empty(shape[:-1] + (1,) if level == "keep" else shape[:-1], dtype=dtype,
                            device=device)
            outs.append(o)
            views.append(o if level == "keep" else o.unsqueeze(-1))
    return outs, views


def _output_forms(plan: KernelPlan) -> list:
    """(level, dtype, dimension order or None, its inverse) of each output, as _new_outputs
    takes them."""
    return [(m.level, dtype, order, order and _inverse(order)) for m, dtype, order in plan.outputs]


def _inverse(order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return inv


# -- the graph compiler ----------------------------------------------------------------------

@dataclass
class CompiledGraph:
    """What compile_graph made of one graph (kept for inspection and tests)."""
    source: str
    module: object
    launches: list
    fused_nodes: int
    graph_module: fx.GraphModule


def generate(gm: fx.GraphModule):
    """Partitions `gm` and writes the kernels: (source, plans)."""
    part = Partition(gm.graph)
    users = {n: set(n.users) for n in gm.graph.nodes}
    digest = hashlib.sha256(str(gm.graph).encode()).hexdigest()[:8]
    plans, texts = [], []
    by_text: dict = {}  # a kernel's text with its name left out -> the plan that has it
    for g in part.groups:
        if not g.members:
            continue
        real = [m for m in g.members.values() if m.node.target not in _VIEW_OPS]
        if not real:
            continue
        ops_used = []
        for m in real:
            name = getattr(m.node.target, "__name__", str(m.node.target)).split(".")[0]
            if name not in ops_used:
                ops_used.append(name)
        name = f"fused_{digest}_{g.index}_{'_'.join(ops_used[:4])}"
        try:
            plan = _Emitter(g, name, users).emit()
        except _Unfusable:
            continue
        plans.append(plan)
        text = "\n".join(plan.lines)
        first = by_text.setdefault(text.replace(name, "", 1), plan)
        plan.kernel = first.name
        what = "rows over the last dimension of" if g.row else "elements of"
        runs = "" if first is plan else f" (launches {first.name}, the same code)"
        walk = f" walked in dimension order {plan.perm}" if plan.perm else ""
        header = [f"// {name}: {what} shape {tuple(g.shape)}{walk}{runs}; fuses:"]
        header += [f"//   {m.node.format_node()}" for m in g.members.values()]
        texts.append("\n".join(header + (plan.lines if first is plan else [])))
    return "\n\n".join(texts) + "\n", plans


def _example_args(plan: KernelPlan):
    """Meta tensors and numbers standing for a launch's arguments (sizes at their hints)."""
    shape = tuple(_hint(s) for s in plan.group.shape)
    _, views = _new_outputs(_output_forms(plan), shape, "meta", plan.perm)
    tensors, scalars = [], []
    for inp in plan.inputs:
        if inp.level == "scalar":
            scalars.append(1.0 if inp.kind == "double" else 1)
            continue
        v = _val(inp.node)
        t = torch.empty_strided([_hint(s) for s in v.shape], [_hint(s) for s in v.stride()],
                                dtype=v.dtype, device="meta")
        tensors.append(_input_view(t, inp.level, inp.unsqueeze, shape, inp.last, plan.perm))
    if plan.perm:
        shape = tuple(shape[d] for d in plan.perm)
    rows = math.prod(shape[:-1])
    tail = [rows, shape[-1]] if plan.group.row else [] if plan.runs else [rows * shape[-1]]
    return tuple(views + tensors + scalars + tail)


def compile_graph(gm: fx.GraphModule, *, arch=None, debug=False) -> CompiledGraph:
    """Compiles one aten graph: the fused groups' kernels as one NVRTC program, and the graph
    rewritten to launch them. `arch` defaults to the device of the graph's CUDA inputs."""
    from ._jit import jit
    source, plans = generate(gm)
    if not plans:
        if lighten(gm.graph):
            gm.recompile()
        return CompiledGraph("", None, [], 0, gm)
    names = list(dict.fromkeys(p.kernel for p in plans))  # the kernels in the source
    if debug:
        print(f"torch_cudajit backend: {len(names)} kernel(s) for {len(plans)} group(s) of graph "
              f"{gm.__class__.__name__}\n{source}", file=sys.stderr)
    module = jit(source, std="c++17")
    kernels = {n: (module if len(names) == 1 else module[n]) for n in names}
    if arch is None:
        device = next((v.device for v in (_val(n) for n in gm.graph.nodes)
                       if isinstance(v, torch.Tensor) and v.device.type == "cuda"), None)
        if device is not None:
            from ._loader import _C
            arch = _C.device_compute_capability(device.index or 0)
    if arch is not None:
        # torch.compile calls the backend with its fake-tensor mode active; the example
        # arguments are plain meta tensors.
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        with unset_fake_temporarily():
            # A kernel that several groups launch: the example arguments of each of them
            # (their layouts may differ).
            specs = {n: [] for n in names}
            for p in plans:
                specs[p.kernel].append(_example_args(p))
        if len(names) == 1:
            kernels[names[0]].precompile(specs[names[0]], arch=arch, processes=False)
        else:
            _compile_in_batches(module, specs, arch)
    launches = [GroupLaunch(kernels[p.kernel], p) for p in plans]
    new_gm = _rewrite(gm, plans, launches)
    return CompiledGraph(source, module, launches,
                         sum(len(p.group.members) for p in plans), new_gm)


def _compile_in_batches(module, specs: dict, arch: int) -> None:
    """The graph's kernels as one NVRTC program per thread: a program shares the parse of its
    headers among its kernels (NVRTC's PCH makes that parse cheap anyway), and NVRTC runs
    programs in parallel threads (the compile releases the GIL)."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    names = list(specs)
    threads = max(1, min(len(names), (os.cpu_count() or 1) // 2, 8))
    if threads == 1:
        module.precompile(specs, arch=arch)
        return
    chunks = [names[i::threads] for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        for done in [pool.submit(module.precompile, {n: specs[n] for n in chunk}, arch=arch)
                     for chunk in chunks]:
            done.result()


def _rewrite(gm: fx.GraphModule, plans, launches) -> fx.GraphModule:
    """The graph with each group's members replaced by one call of its launch (and getitems
    for its outputs), in an order that respects every dependency."""
    owner = {}
    for p, launch in zip(plans, launches):
        for n in p.group.members:
            owner[n] = (p, launch)
    # Units in graph order: a node of its own, or a whole group at its first member.
    units, seen = [], set()
    for n in gm.graph.nodes:
        if n in owner:
            p = owner[n][0]
            if id(p) not in seen:
                seen.add(id(p))
                units.append(("group", owner[n]))
        else:
            units.append(("node", n))

    def unit_inputs(u):
        if u[0] == "node":
            return u[1].all_input_nodes
        p = u[1][0]
        return [i.node for i in p.inputs]

    def unit_key(u):
        return ("node", u[1]) if u[0] == "node" else ("group", id(u[1][0]))

    producer = {}
    for u in units:
        if u[0] == "node":
            producer[u[1]] = unit_key(u)
        else:
            for n in u[1][0].group.members:
                producer[n] = unit_key(u)
    by_key = {unit_key(u): u for u in units}
    order, state = [], {}

    def visit(u):
        k = unit_key(u)
        if state.get(k) == 2:
            return
        if state.get(k) == 1:
            raise AssertionError("cycle among fusion groups")
        state[k] = 1
        for x in unit_inputs(u):
            pk = producer.get(x)
            if pk is not None and pk != k:
                visit(by_key[pk])
        state[k] = 2
        order.append(u)

    for u in units:
        visit(u)
    graph = fx.Graph()
    env = {}
    for u in order:
        if u[0] == "node":
            env[u[1]] = graph.node_copy(u[1], lambda x: env[x])
            continue
        p, launch = u[1]
        call = graph.call_function(launch, tuple(env[n] for n in launch.reads))
        call.name = p.name
        for k, (m, _, _) in enumerate(p.outputs):
            got = graph.call_function(operator.getitem, (call, k))
            got.meta["val"] = m.node.meta.get("val")
            env[m.node] = got
    # Every member read outside its group is one of the group's outputs (emit), so no other
    # member is ever looked up here. Views that a launch now makes itself and nothing else
    # reads go.
    for n in list(reversed(graph.nodes)):
        if n.op == "call_function" and n.target in _VIEW_OPS and not n.users:
            graph.erase_node(n)
    lighten(graph)
    new_gm = fx.GraphModule(gm, graph)
    new_gm.graph.lint()
    return new_gm
