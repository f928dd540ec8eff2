"""Scripts DeployModel, runs it on the GPU and saves, for the C++ program:
  model.pt  the scripted model (its kernels are pickled as source, name and options)
  data.pt   the inputs and the outputs Python computed, as buffers of a scripted module

Run: python examples/deploy/export.py <folder>"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import DeployModel, reference  # noqa: E402


class Tensors(torch.nn.Module):
    def __init__(self, **tensors):
        super().__init__()
        for name, t in tensors.items():
            self.register_buffer(name, t)

    def forward(self) -> int:
        return 0


def main(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(300, 200, device="cuda")
    y = torch.randn(300, 200, device="cuda")
    alpha = 1.75
    scripted = torch.jit.script(DeployModel())
    out = scripted(x, y, alpha)
    torch.testing.assert_close(out, reference(x, y, alpha))
    scripted.save(os.path.join(folder, "model.pt"))
    data = torch.jit.script(Tensors(x=x, y=y, alpha=torch.tensor(alpha, dtype=torch.float64),
                                    expected=out))
    data.save(os.path.join(folder, "data.pt"))
    print(f"saved {folder}/model.pt and {folder}/data.pt; output sum {out.sum().item():.6f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "deploy_out")
