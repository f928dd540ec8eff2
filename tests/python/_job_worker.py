"""One rank of the job-store tests (tests/python/test_distributed.py): run by torchrun, or
started alone with an explicit TCPStore. Compiles the scale kernel for the dtypes given, for
sm_90 (no GPU needed), each rank in its own order, and writes what it compiled, received and
got to <out>/<rank>.json.

    python _job_worker.py OUT DTYPES [--node-size N] [--store HOST:PORT] [--gpu]

--node-size N: ranks r // N share one cache folder (a simulated node); default: each rank its
own. --store: no process group; this TCPStore (a client) through use_store. --gpu: launch the
kernel on this rank's GPU and check it against torch (process group on nccl with a GPU per
rank, else on gloo).
"""
import argparse
import hashlib
import json
import os
import sys

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("dtypes")
p.add_argument("--node-size", type=int, default=1)
p.add_argument("--store", default="")
p.add_argument("--rank", type=int, default=-1)
p.add_argument("--gpu", action="store_true")
args = p.parse_args()

rank = args.rank if args.rank >= 0 else int(os.environ.get("RANK", "0"))
# Before torch_cudajit reads its settings: this rank's node folder.
os.environ["TORCH_CUDAJIT_CACHE_DIR"] = os.path.join(args.out, f"cache-node{rank // args.node_size}")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import torch_cudajit as cj  # noqa: E402
import torch_cudajit.distributed as cjd  # noqa: E402
from _support import SCALE  # noqa: E402


if args.store:
    host, port = args.store.rsplit(":", 1)
    from datetime import timedelta
    cjd.use_store(dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=30)),
                  timeout=float(os.environ.get("JOB_TEST_TIMEOUT", "120")),
                  stale=float(os.environ.get("JOB_TEST_STALE", "15")))
else:
    # nccl needs a GPU per rank; ranks sharing one GPU talk through gloo.
    one_each = args.gpu and torch.cuda.device_count() >= int(os.environ["WORLD_SIZE"])
    dist.init_process_group("nccl" if one_each else "gloo")

dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
# Each rank starts at another dtype, so that the compiling ranks are spread over the job.
order = dtypes[rank % len(dtypes):] + dtypes[:rank % len(dtypes)]
k = cj.jit(SCALE)
cubins = {}
checked = 0
for dtype in order:
    print("asking", dtype, flush=True)  # the tests wait for this before breaking things
    if args.gpu:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        x = torch.arange(1000, device=device).to(dtype)
        out = torch.empty_like(x)
        k[4, 256](out, x, 3.0)
        torch.testing.assert_close(out, x * 3.0)
        checked += 1
    else:
        x = torch.empty(8, dtype=dtype, device="meta")
        cubins[str(dtype)] = hashlib.sha256(k.compile(x, x, 2.0, arch="sm_90").cubin).hexdigest()

result = dict(rank=rank, stats=cjd.stats(), cubins=cubins, checked=checked,
              hits=cj._C.cache_counters()["hits"])
with open(os.path.join(args.out, f"{rank}.json"), "w") as f:
    json.dump(result, f)
if dist.is_initialized():
    dist.barrier()
    dist.destroy_process_group()
