import subprocess, sys
pre = "import torch, torch_cudajit as cj\nfrom torch_cudajit import _C\n"
k = "k = cj.jit('extern \"C\" __global__ void fill(float* out, float v, int n) { out[0] = v; }')\n"
cases = {
  "A_cpu_arch90": k + "print(k.compile(torch.empty(3), 1.0, 3, arch=90))",
  "B_driver_then_arch90": "print(_C.driver_available())\n" + k + "print(k.compile(torch.empty(3), 1.0, 3, arch=90))",
  "C_cuda_tensor_arch90": k + "print(k.compile(torch.empty(3, device='cuda'), 1.0, 3, arch=90))",
  "D_program_only": "p = _C.Program('__global__ void f(float* x) {}', 'k.cu'); print(p.kernel_names)",
}
for name, body in cases.items():
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", pre + body], capture_output=True, text=True)
    print(name, "rc", r.returncode, (r.stdout + r.stderr)[-300:].replace("\n", " | "))
