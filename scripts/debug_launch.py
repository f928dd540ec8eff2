import faulthandler, sys; faulthandler.enable()
import torch, torch_cudajit as cj
from torch_cudajit import _C
print("driver", _C.driver_available(), flush=True)
print("cc", _C.device_compute_capability(0), flush=True)
print("nvrtc", cj.nvrtc_version(), _C.default_include_dirs(), flush=True)
k = cj.jit('extern "C" __global__ void fill(float* out, float v, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = v; }')
o = torch.empty(1000, device="cuda")
c = k.compile(o, 3.0, 1000); print("compiled", c, flush=True)
sk = k.specialize(o, 3.0, 1000); print("spec", sk, flush=True)
l = k[4, 256]; print("launcher", l, flush=True)
l(o, 3.0, 1000); torch.cuda.synchronize(); print("launched", o[:4], flush=True)
