"""torch.compile(backend="cudajit") against eager and Inductor on three models (a GPT-2 block, a
LLaMA-style block, a ResNet basic block; inference, bfloat16).

For each model and backend, in fresh processes:
  cold compile  the first call with every cache empty (Inductor's, Triton's and ours): Dynamo,
                AOTAutograd, code generation and compilation, and the first run;
  warm start    the first call of a new process that finds the caches the cold process left;
  steady state  the median time of one call after warm-up, measured with CUDA events in the warm
                process; with --steady-processes N, the median of that figure over N warm
                processes (the figure moves between processes by up to a tenth).
torch and torch._dynamo are imported before the clock starts in every process; what a backend
imports on its first call counts as its compile. Inductor runs in its default mode and in
max-autotune-no-cudagraphs. aot_eager (Dynamo and AOTAutograd, no compiler) is the floor of
the first call of every backend built on AOTAutograd, this one and Inductor alike; the table
gives each target's floor from it. `--backends` may also name cudajit-channels-last, the backend with
options={"channels_last": True}, and `--profile-backend` profiles it.

Targets (the issue this backend answers): cold compile at most 1/10 of Inductor's default,
warm start at most 1/5, steady state at least 0.95x Inductor's default and faster than eager.

  python benchmarks/backend.py [--models gpt2,llama,resnet] [--markdown] [--plot FILE]
                               [--steady-processes N]
  python benchmarks/backend.py --compile-latency     (no GPU needed)

--compile-latency: each kernel the backend generates for the three models' inference graphs
(traced on fake tensors, compiled for sm_90), compiled by the plugin in a warm process (its
automatic precompiled header made by an earlier compile) against bare NVRTC (ctypes) compiling
the same generated text with the same options and name expressions and no PCH; medians over
fresh texts (a comment varies), the disk cache off. Prediction: the PCH saves the parse of
cj/cj.cuh and CUDA's fp16/bf16 headers, most of a small kernel's front-end time.
"""
from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# aot_eager is torch.compile's "aot_eager": Dynamo and AOTAutograd with no compiler after them,
# the floor of the first call of every backend built on AOTAutograd (Inductor's and this one).
BACKENDS = ["eager", "aot_eager", "inductor", "inductor-max-autotune", "cudajit"]
# Measured when named in --backends: the backend with its channels-last convolutions.
EXTRA_BACKENDS = ["cudajit-channels-last"]
_OPTIONS = {"cudajit": {}, "cudajit-channels-last": {"channels_last": True}}


def child(model_name: str, backend: str, reps: int) -> dict:
    """One process's measurement: the first call, then the steady state."""
    import torch
    import torch._dynamo  # noqa: F401  (imported before the clock, in every process)
    sys.path.insert(0, HERE)
    import _backend_models as models
    if backend.startswith("cudajit"):
        import torch_cudajit  # noqa: F401
    model, inputs = models.make(model_name, "cuda", torch.bfloat16)
    model.eval()
    if backend == "eager":
        fn = model
    elif backend == "aot_eager":
        fn = torch.compile(model, backend="aot_eager")
    elif backend == "inductor":
        fn = torch.compile(model)
    elif backend == "inductor-max-autotune":
        fn = torch.compile(model, mode="max-autotune-no-cudagraphs")
    else:
        fn = torch.compile(model, backend="cudajit", options=_OPTIONS[backend])
    with torch.no_grad():
        ref = model(*inputs) if backend != "eager" else None
        torch.cuda.synchronize()
        profiler = _first_call_profiler()
        t0 = time.perf_counter()
        out = fn(*inputs)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        err = float((out.float() - ref.float()).abs().max()) if ref is not None else 0.0
        for _ in range(10):
            fn(*inputs)
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(*inputs)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
    return {"first_s": first, "steady_ms": statistics.median(times), "max_abs_err": err}


def _first_call_profiler():
    """A running cProfile when --first-call-profile asked for one (the child's first call, where
    a cold compile or a warm start goes), else None."""
    if not os.environ.get("CJ_BENCH_PROFILE_FIRST"):
        return None
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
    return profiler


def first_call_profile(model_name: str, backend: str) -> None:
    """A cold process, then a warm one, of one backend on one model, each first call under
    cProfile (the 40 costliest calls by cumulative time, to stderr)."""
    with tempfile.TemporaryDirectory(prefix="cj_backend_bench_") as cache:
        for phase in ("cold", "warm"):
            env = dict(os.environ, CJ_BENCH_PROFILE_FIRST="1")
            p = subprocess.run([sys.executable, __file__, "--child", model_name, backend, "5"],
                               capture_output=True, text=True, env=_cache_env(cache, env))
            print(f"== {model_name} {backend} {phase}: {p.stdout.strip()}\n{p.stderr}")


def _cache_env(cache_dir: str, env=None) -> dict:
    """The environment of a child whose caches (Inductor's, Triton's, ours) are under cache_dir."""
    return dict(env or os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache_dir, "inductor"),
                TRITON_CACHE_DIR=os.path.join(cache_dir, "triton"),
                TORCH_CUDAJIT_CACHE_DIR=os.path.join(cache_dir, "cudajit"))


def run_child(model_name, backend, cache_dir, reps, timeout=480) -> dict:
    env = _cache_env(cache_dir)
    try:
        p = subprocess.run([sys.executable, __file__, "--child", model_name, backend, str(reps)],
                           capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not line:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    return json.loads(line[-1])


def measure(model_name: str, reps: int, backends=BACKENDS, rows=None, measured=lambda: None,
            steady_processes: int = 1) -> dict:
    """Each backend's cold and warm process on one model, into `rows`; `measured()` is called
    after each backend. With steady_processes > 1, more warm processes follow the first, and
    the warm row's steady state is the median over all of them (each process's figure kept in
    `steady_runs_ms`); its warm start stays the first warm process's."""
    rows = {} if rows is None else rows
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix="cj_backend_bench_") as cache:
            cold = run_child(model_name, backend, cache, reps)
            warm = run_child(model_name, backend, cache, reps)
            more = [run_child(model_name, backend, cache, reps) for _ in range(steady_processes - 1)]
        runs = [r["steady_ms"] for r in [warm] + more if "steady_ms" in r]
        if more and "error" not in warm:
            warm = dict(warm, steady_ms=statistics.median(runs), steady_runs_ms=runs)
        rows[backend] = {"cold": cold, "warm": warm}
        print(f"  {model_name:7s} {backend:22s} cold {cold} warm {warm}", file=sys.stderr,
              flush=True)
        measured()
    return rows


def _f(v, fmt):
    return format(v, fmt) if isinstance(v, (int, float)) else "—"


def table(results: dict) -> str:
    lines = ["| model | backend | cold compile (s) | warm start (s) | steady (ms) | "
             "steady vs eager | steady vs Inductor |",
             "|---|---|---|---|---|---|---|"]
    verdicts = []
    for model_name, rows in results.items():
        eager = rows["eager"]["warm"].get("steady_ms")
        ind = rows["inductor"]
        ind_ms = ind["warm"].get("steady_ms")
        for backend, r in rows.items():
            cold, warm = r["cold"], r["warm"]
            if "error" in warm or "error" in cold:
                lines.append(f"| {model_name} | {backend} | error: {cold.get('error') or warm.get('error')} ||||")
                continue
            ms = warm["steady_ms"]
            comp = backend != "eager"
            lines.append(
                f"| {model_name} | {backend} | {_f(cold['first_s'] if comp else None, '.2f')} | "
                f"{_f(warm['first_s'] if comp else None, '.2f')} | {ms:.3f} | "
                f"{_f(eager / ms if eager else None, '.2f')}x | "
                f"{_f(ind_ms / ms if ind_ms else None, '.2f')}x |")
        cj = rows["cudajit"]
        if all("error" not in cj[k] and "error" not in ind[k] for k in ("cold", "warm")) and eager:
            cold_ratio = cj["cold"]["first_s"] / ind["cold"]["first_s"]
            warm_ratio = cj["warm"]["first_s"] / ind["warm"]["first_s"]
            speed = ind_ms / cj["warm"]["steady_ms"]
            floor = rows.get("aot_eager", {})
            floors = {k: (f"; Dynamo and AOTAutograd alone (aot_eager) "
                          f"{floor[k]['first_s'] / ind[k]['first_s']:.3f}")
                      if "first_s" in floor.get(k, {}) else "" for k in ("cold", "warm")}
            checks = [("cold compile", cold_ratio <= 0.1,
                       f"{cold_ratio:.3f} of Inductor's (target 0.1{floors['cold']})"),
                      ("warm start", warm_ratio <= 0.2,
                       f"{warm_ratio:.3f} of Inductor's (target 0.2{floors['warm']})"),
                      ("steady state vs Inductor", speed >= 0.95, f"{speed:.2f}x (target 0.95x)"),
                      ("steady state vs eager", eager / cj["warm"]["steady_ms"] > 1.0,
                       f"{eager / cj['warm']['steady_ms']:.2f}x (target above 1x)")]
            for what, ok, text in checks:
                verdicts.append(f"- {model_name}, {what}: {text}{'' if ok else ' — missed'}")
    return "\n".join(lines + [""] + verdicts)


def plot(results: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    names = list(results)
    for ax, (key, phase, title) in zip(axes, [("first_s", "cold", "cold compile (s)"),
                                             ("first_s", "warm", "warm start (s)"),
                                             ("steady_ms", "warm", "steady state (ms)")]):
        measured = [b for b in BACKENDS + EXTRA_BACKENDS if all(b in results[m] for m in results)]
        backends = measured if key == "steady_ms" else [b for b in measured if b != "eager"]
        width = 0.8 / len(backends)
        for i, b in enumerate(backends):
            vals = [results[m][b][phase].get(key, 0) for m in names]
            # One colour per backend in every panel (eager appears in the steady state only).
            ax.bar([x + i * width for x in range(len(names))], vals, width, label=b,
                   color=f"C{(BACKENDS + EXTRA_BACKENDS).index(b)}")
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names)
        ax.set_title(title)
        ax.set_ylim(bottom=0)  # linear from 0: bars' heights compare as the times do
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def compile_latency(repeats: int = 9) -> str:
    import torch
    sys.path.insert(0, HERE)
    import _backend_models as models
    import torch_cudajit as cj
    from torch_cudajit import _fusion
    from cache import bare_nvrtc_compile, nvrtc_library
    rows = []
    for name in ("gpt2", "llama", "resnet"):
        model, inputs = models.make(name, "meta", torch.bfloat16)
        model.eval()
        gm = models.inference_graph(model, inputs)
        source, plans = _fusion.generate(gm)
        plans = [p for p in plans if p.kernel == p.name]  # one per kernel in the source
        examples = [_fusion._example_args(p) for p in plans]
        warm = cj.jit(source, cache=False)
        kernels = [warm if len(plans) == 1 else warm[p.name] for p in plans]
        inputs_of = [k._core.compile_inputs(a, 90) for k, a in zip(kernels, examples)]
        for k, a in zip(kernels, examples):
            k.compile(*a, arch=90)  # the PCH of this option set now exists
        nvrtc = nvrtc_library()
        bare, ours, ours_jit = [], [], []
        for i in range(repeats):
            for j, (plan, inp) in enumerate(zip(plans, inputs_of)):
                t0 = time.perf_counter()
                bare_nvrtc_compile(nvrtc, inp["source"] + f"\n// bare {i}\n", inp["filename"],
                                   inp["options"], inp["name_expressions"])
                t1 = time.perf_counter()
                fresh = cj.jit(source + f"\n// ours {i} {j}\n", cache=False)
                t2 = time.perf_counter()
                (fresh if len(plans) == 1 else fresh[plan.name]).compile(*examples[j], arch=90)
                t3 = time.perf_counter()
                bare.append((t1 - t0) * 1e3)
                ours.append((t3 - t2) * 1e3)
                ours_jit.append((t3 - t1) * 1e3)
        b, o, oj = (statistics.median(v) for v in (bare, ours, ours_jit))
        rows.append(f"| {name} | {len(plans)} | {b:.1f} | {o:.1f} ({o / b:.2f}x) | "
                    f"{oj:.1f} ({oj / b:.2f}x) |")
    return "\n".join(["| model | kernels | bare NVRTC, no PCH (ms) | plugin compile (ms) | "
                      "plugin, cj.jit + compile (ms) |", "|---|---|---|---|---|"] + rows)


def _step_times(fn, inputs, steps: int = 20) -> tuple:
    """(seconds the host takes to issue one call of fn, seconds a call takes in all), after 5
    warm-up calls; fewer steps than the launch queue holds, so that the GPU never holds the
    host back while it issues."""
    import torch
    with torch.no_grad():
        for _ in range(5):
            fn(*inputs)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn(*inputs)
        issued = (time.perf_counter() - t0) / steps
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / steps
    return issued, wall


def _synchronizing(fn, inputs) -> list:
    """The warnings torch's synchronization debug mode gives for one call of fn: each operation
    that makes the host wait for the GPU (an issue time near the step's whole time is the sign)."""
    import warnings

    import torch
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn(*inputs)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [str(w.message).splitlines()[0][:120] for w in caught]


def host_breakdown(gm, args, reps: int = 50) -> str:
    """Host time of each call in a compiled graph, each called `reps` times in a row on the
    arguments one step gives it (the median of 9 such rounds, the GPU's time not waited for),
    the twelve costliest, then the graph's forward as a whole: where the host's part of a step
    goes. A fused group's line adds its kernel launch alone (the plugin's launcher on the same
    arguments), so the rest is the group's own Python: reading sizes, viewing its inputs,
    allocating its outputs."""
    import torch
    import torch.fx as fx

    from _timing import per_call_us
    from torch_cudajit._fusion import GroupLaunch

    calls: list = []

    class Recording(fx.Interpreter):
        def call_function(self, target, a, kw):
            calls.append((target, a, kw))
            return super().call_function(target, a, kw)

        def call_method(self, target, a, kw):
            calls.append((getattr(type(a[0]), target), a, kw))
            return super().call_method(target, a, kw)

    def timed(fn, *a, **kw) -> float:
        # Each call was made once already, by the recording run.
        return per_call_us(lambda: fn(*a, **kw), calls=reps, repeats=9, warmup=0)

    def launch_only(group: GroupLaunch, a) -> float:
        # The arguments the group's cached launcher gets, recorded by wrapping it once.
        got = []
        saved = dict(group.launchers)
        for key, launcher in saved.items():
            group.launchers[key] = lambda *la, _l=launcher: (got.append((_l, la)), _l(*la))[1]
        try:
            group(*a)
        finally:
            group.launchers.update(saved)
        return timed(got[0][0], *got[0][1]) if got else float("nan")

    with torch.no_grad():
        Recording(gm).run(*args)
        rows = []
        for target, a, kw in calls:
            name = getattr(target, "__name__", str(target))
            us = timed(target, *a, **kw)
            if isinstance(target, GroupLaunch):
                name = f"{name} (launch alone {launch_only(target, a):.1f} us)"
            rows.append((us, name))
        torch.cuda.synchronize()
    rows.sort(key=lambda r: -r[0])
    forward, _ = _step_times(gm, args)
    lines = [f"graph forward issues in {forward * 1e6:.0f} us; its {len(rows)} calls, each "
             f"called {reps} times in a row, sum to {sum(us for us, _ in rows):.0f} us:"]
    lines += [f"  {us:7.1f} us  {name}" for us, name in rows[:12]]
    return "\n".join(lines)


def profile(model_name: str, backend_name: str = "cudajit") -> None:
    """Host time per step, then the kernels that took the GPU's time (torch.profiler), and the
    generated kernels' headers: where a compiled step's time goes (`backend_name` "cudajit" or
    one of EXTRA_BACKENDS)."""
    import torch
    from torch._functorch import aot_autograd
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    sys.path.insert(0, HERE)
    import _backend_models as models
    from torch_cudajit import backend
    model, inputs = models.make(model_name, "cuda", torch.bfloat16)
    model.eval()
    fn = torch.compile(model, backend="cudajit", options=_OPTIONS[backend_name])
    # The arguments each compiled graph is called with, for the breakdown by node.
    graph_args = []
    boxed = aot_autograd.make_boxed_func

    def recording(f):
        return boxed(lambda *a: (graph_args.append(a), f(*a))[1])
    aot_autograd.make_boxed_func = recording
    with torch.no_grad():
        fn(*inputs)
    aot_autograd.make_boxed_func = boxed
    issued, wall = _step_times(fn, inputs)
    print(f"{model_name}: host {issued * 1e3:.3f} ms per step to issue, {wall * 1e3:.3f} ms "
          f"per step in all")
    print(f"{model_name}: operations that wait for the GPU in one step: {_synchronizing(fn, inputs)}")
    with torch.no_grad():
        eager_issued, _ = _step_times(model, inputs)
        print(f"{model_name}: eager issues a step in {eager_issued * 1e3:.3f} ms")
        graph = backend.compiled_graphs()[-1]
        print(host_breakdown(graph.graph_module, graph_args[-1]))
        with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                fn(*inputs)
            torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=16,
                                    max_name_column_width=70))
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=16,
                                    max_name_column_width=70))
    for graph in backend.compiled_graphs():
        print("\n".join(line for line in graph.source.splitlines() if line.startswith("// fused")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--models", default="gpt2,llama,resnet")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--steady-processes", type=int, default=1, metavar="N",
                    help="steady state as the median over N warm processes (default 1)")
    ap.add_argument("--backends", default=",".join(BACKENDS),
                    help="a subset of " + ",".join(BACKENDS + EXTRA_BACKENDS) + " (the table "
                    "needs eager, inductor and cudajit)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--plot")
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--profile", metavar="MODEL", help="profile one model's compiled step")
    ap.add_argument("--profile-backend", default="cudajit", choices=list(_OPTIONS),
                    help="the backend --profile compiles with (default cudajit)")
    ap.add_argument("--first-call-profile", nargs=2, metavar=("MODEL", "BACKEND"),
                    help="cProfile of a cold and a warm process's first call")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="the table (and --plot) from results that --json wrote, merged in order")
    ap.add_argument("--compile-latency", action="store_true",
                    help="only the per-kernel compile latency against bare NVRTC (no GPU needed)")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]))))
        return
    if args.compile_latency:
        print(compile_latency())
        return
    if args.profile:
        profile(args.profile, args.profile_backend)
        return
    if args.first_call_profile:
        first_call_profile(*args.first_call_profile)
        return
    backends = args.backends.split(",")
    results = {}
    if args.from_json:
        for path in args.from_json:  # runs of other models or backends on the same machine
            with open(path) as f:
                for model_name, rows in json.load(f).items():
                    results.setdefault(model_name, {}).update(rows)
        print(table(results))
        if args.plot:
            plot(results, args.plot)
        return

    def save():  # after each backend, so that a run cut short keeps what it measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    if args.steady_processes < 1:
        ap.error(f"--steady-processes: {args.steady_processes} is not a process count; expected 1 or more")
    for m in args.models.split(","):
        measure(m, args.reps, backends, results.setdefault(m, {}), save, args.steady_processes)
    if not {"eager", "inductor", "cudajit"} <= set(backends):
        print(json.dumps(results, indent=1))
        return
    print(table(results))
    if args.plot:
        try:
            plot(results, args.plot)
        except ImportError:
            print("(matplotlib missing: no plot)", file=sys.stderr)


if __name__ == "__main__":
    main()
