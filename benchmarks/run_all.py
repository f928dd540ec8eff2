"""Runs every benchmark and writes benchmarks/RESULTS.md: one section per benchmark, holding what
it measures, its floor and targets (the benchmark's own docstring) and the tables of this run,
under one header with the date, machine, versions and commit.

Run (on the GPU machine; without a GPU the GPU benchmarks are listed as not run):
    python benchmarks/run_all.py                  # all, writes benchmarks/RESULTS.md
    python benchmarks/run_all.py --quick          # shorter variants where a benchmark has one
    python benchmarks/run_all.py --only cache,launch_overhead --output /tmp/RESULTS.md
    python benchmarks/run_all.py --deploy build/examples/deploy/torch_cudajit_deploy
                                 # adds the C++ launch floor: examples/deploy --bench
    python benchmarks/run_all.py --only cluster --update
                                 # reruns some, keeping the file's other sections

Every section names the run it came from (date, machine, torch, commit), so a file updated
section by section (CPU-only benchmarks on a CPU machine, say) stays truthful.

Each benchmark runs in its own process (a crash or a timeout is recorded in its section, and the
others still run). Earlier results live in the file's git history.
"""
from __future__ import annotations

import argparse
import ast
import datetime
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark script and how to run it."""
    name: str
    args: tuple = ()
    quick_args: tuple = ()  # replaces `args` under --quick
    gpu: bool = True
    timeout_s: int = 900


BENCHMARKS = [
    Benchmark("launch_overhead", ("--markdown",)),
    Benchmark("op_overhead"),
    Benchmark("cache", ("--markdown",), ("--markdown", "--latency-only")),
    Benchmark("nvrtc_scaling", gpu=False),
    Benchmark("bandwidth", ("--plot", os.path.join(HERE, "bandwidth.png")),
              ("--quick", "--plot", os.path.join(HERE, "bandwidth.png"))),
    Benchmark("virtual_grid_probe"),
    Benchmark("row_kernel_probe"),
    Benchmark("run_kernel_probe"),
    Benchmark("cluster", ("--markdown",), ("--markdown", "--ranks", "1,8,32"), gpu=False),
    Benchmark("whole_file", ("--markdown",),
              ("--markdown", "--files", "gelu_forward,softmax_forward", "--repeats", "1"), gpu=False),
    Benchmark("backend", ("--markdown", "--plot", os.path.join(HERE, "backend.png")),
              ("--markdown", "--models", "gpt2", "--reps", "10"), timeout_s=1800),
]


def _command_output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _versions() -> list[tuple[str, str]]:
    """The rows of the header: date, machine, versions and commit."""
    import torch

    rows = [("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))]
    gpu = _command_output(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    rows.append(("GPU, driver", gpu.splitlines()[0] if gpu else "none"))
    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    rows.append(("CPU", f"{cpu}, {len(os.sched_getaffinity(0))} usable cores"))
    rows.append(("Python", platform.python_version()))
    rows.append(("torch", f"{torch.__version__} (CUDA {torch.version.cuda})"))
    if REPO not in sys.path:
        sys.path.append(REPO)  # the checkout's package when it is not installed
    try:
        import torch_cudajit as cj

        rows.append(("torch_cudajit", f"{cj.__version__}, NVRTC {'.'.join(map(str, cj.nvrtc_version()))}"))
    except Exception as e:  # the header still says what is missing
        rows.append(("torch_cudajit", f"not importable: {e}"))
    peers = []
    for module, label in (("cupy", "CuPy"), ("triton", "Triton"), ("numba_cuda", "numba-cuda")):
        try:
            peers.append(f"{label} {__import__(module).__version__}")
        except Exception:
            peers.append(f"{label} not installed")
    rows.append(("peers", ", ".join(peers)))
    commit = _command_output(["git", "rev-parse", "--short", "HEAD"]) or "unknown"
    if _command_output(["git", "status", "--porcelain", "--untracked-files=no"]):
        commit += " with uncommitted changes"
    rows.append(("commit", commit))
    return rows


def _description(name: str) -> str:
    """The benchmark's docstring without its "Run:" lines (the section names the command)."""
    with open(os.path.join(HERE, name + ".py"), encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    keep = [p for p in doc.split("\n\n") if not p.lstrip().startswith("Run:")]
    return "\n\n".join(keep).strip()


def _as_section_body(stdout: str) -> str:
    """A benchmark's markdown output under a section: its '# title' lines become captions and its
    '## sub' headings sit below the section's own level."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("# "):
            out += [f"*{line[2:].strip()}*", ""]
        elif line.startswith("#"):
            out.append("##" + line)
        else:
            out.append(line)
    return "\n".join(out).strip()


def run(bench: Benchmark, quick: bool, has_gpu: bool) -> str:
    args = list(bench.quick_args if quick and bench.quick_args else bench.args)
    shown = " ".join(["python", f"benchmarks/{bench.name}.py", *[os.path.relpath(a, REPO) if os.path.isabs(a) else a
                                                                 for a in args]])
    head = f"## {bench.name} (`{shown}`)\n\n{_description(bench.name)}\n\n"
    if bench.gpu and not has_gpu:
        return head + "Not run: this machine has no GPU.\n"
    t0 = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    try:
        proc = subprocess.run([sys.executable, os.path.join(HERE, bench.name + ".py"), *args], cwd=REPO,
                              capture_output=True, text=True, timeout=bench.timeout_s, env=env)
    except subprocess.TimeoutExpired as e:
        partial = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return head + f"Stopped after {bench.timeout_s} s (the timeout); its output so far:\n\n" \
            + _as_section_body(partial) + "\n"
    elapsed = time.perf_counter() - t0
    body = _as_section_body(proc.stdout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        return head + body + f"\n\nFailed with exit status {proc.returncode}:\n\n```\n{tail}\n```\n"
    print(f"{bench.name}: {elapsed:.0f} s", file=sys.stderr, flush=True)
    return head + body + f"\n\n({elapsed:.0f} s)\n"


def run_deploy(binary: str, has_gpu: bool) -> str:
    """The launch floor: examples/deploy times a plain <<<>>> launch loop (nvcc) against
    cudajit::launch from C++ with no Python, in one process."""
    import tempfile

    head = (f"## deploy (`examples/deploy/export.py DIR && {os.path.relpath(binary, REPO)} DIR/model.pt "
            "DIR/data.pt --bench`)\n\nThe C++ floor of a launch: a plain `<<<>>>` loop of the same "
            "kernel compiled by nvcc, against `cudajit::launch` through the dispatcher from a "
            "LibTorch program with no Python.\n\n")
    if not has_gpu:
        return head + "Not run: this machine has no GPU.\n"
    with tempfile.TemporaryDirectory() as tmp:
        steps = [[sys.executable, os.path.join(REPO, "examples", "deploy", "export.py"), tmp],
                 [binary, os.path.join(tmp, "model.pt"), os.path.join(tmp, "data.pt"), "--bench"]]
        for cmd in steps:
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
                return head + f"Failed with exit status {proc.returncode}:\n\n```\n{tail}\n```\n"
    table = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    return head + "\n".join(table) + "\n"


def _run_line(rows: dict) -> str:
    machine = rows["GPU, driver"] if rows["GPU, driver"] != "none" else "no GPU"
    return (f"*Run {rows['date']} on {machine}, {rows['CPU']}; torch {rows['torch']}; "
            f"commit {rows['commit']}.*")


def _stamped(section: str, stamp: str) -> str:
    """The section with the line naming its run below its heading."""
    heading, rest = section.split("\n", 1)
    return f"{heading}\n\n{stamp}\n{rest}"


def _split_sections(text: str) -> tuple[str, dict]:
    """A results file's header and its sections by benchmark name ('## name (...')."""
    parts = re.split(r"(?m)^(?=## )", text)
    sections = {p.split()[1]: p.rstrip("\n") + "\n" for p in parts[1:]}
    return parts[0], sections


def _ordered(sections: dict) -> list:
    """Section names in the file's order: the benchmarks' order, the C++ floor after the launch
    benchmarks, then any others the file held."""
    order = [b.name for b in BENCHMARKS]
    order.insert(2, "deploy")
    return [n for n in order if n in sections] + [n for n in sections if n not in order]


def main(argv=None) -> int:
    names = [b.name for b in BENCHMARKS]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated benchmarks, of: " + ", ".join(names))
    ap.add_argument("--quick", action="store_true", help="the shorter variant where one exists")
    ap.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"), help="the file to write")
    ap.add_argument("--deploy", default="", help="examples/deploy's built program: adds the C++ floor")
    ap.add_argument("--update", action="store_true",
                    help="replace only the sections run now in an existing --output file")
    args = ap.parse_args(argv)
    chosen = [n.strip() for n in args.only.split(",") if n.strip()] or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {', '.join(unknown)}; expected some of {', '.join(names)}")
    import torch

    has_gpu = torch.cuda.is_available()
    rows = _versions()
    stamp = _run_line(dict(rows))
    sections = {b.name: run(b, args.quick, has_gpu) for b in BENCHMARKS if b.name in chosen}
    if args.deploy:
        sections["deploy"] = run_deploy(os.path.abspath(args.deploy), has_gpu)
    sections = {name: _stamped(text, stamp) for name, text in sections.items()}
    if args.update and os.path.exists(args.output):
        with open(args.output, encoding="utf-8") as f:
            header, kept = _split_sections(f.read())
        kept.update(sections)
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(header + "\n".join(kept[name] for name in _ordered(kept)))
        print(f"updated {', '.join(sections)} in {args.output}", file=sys.stderr)
        return 0
    text = ["# Benchmark results", "",
            "The current figures of every benchmark, written by `python benchmarks/run_all.py"
            + (" --quick" if args.quick else "") + "` in one run. Each benchmark runs its peers and "
            "a native torch op in the same process, so compare the rows of one table: the ratios "
            "hold between runs, absolute host times move with the machine's clocks. Earlier runs "
            "are in this file's git history (`git log -p benchmarks/RESULTS.md`).", "",
            "| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows], ""]
    with open(args.output, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n" + "\n".join(sections[name] for name in _ordered(sections)))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
