// torch_cudajit: the cudajit op family's schemas, in one place (the custom class they take is
// defined in kernel_object.cpp). The
// implementations register per dispatch key (launch_cuda.cpp); the fake (meta) implementation
// is Python's (torch_cudajit/_fake.py), since tracing hands it a fake kernel object that only
// exists in Python.
#include "kernel_object.h"

#include <torch/library.h>

TORCH_LIBRARY(cudajit, m) {
  torch_cudajit::ensure_kernel_class();  // torch.classes.cudajit.Kernel

  // Launches kernel `k`. Tensors the kernel writes (non-const parameters) go in out0..out3 and
  // then more_outputs, in parameter order; read-only tensors (const element type) in inputs.
  // The annotations tell torch.compile and TorchScript what is written.
  //
  // Numbers travel as `kinds`, one character per number parameter in parameter order: 'i' takes
  // the next entry of `ints`, 'b' a bool from `ints` (0 or 1), 'f' the next entry of `floats`,
  // 'c' two entries of `floats` (real, imaginary). An `auto` parameter has a kind too: a number's,
  // or 't' when it is given a tensor, which then sits with the outputs in parameter order. A number's Python type can decide a template
  // argument, so it must survive; and torch.export's serializer and AOTInductor's runtime take
  // only lists of one element type (not Scalar[]).
  //
  // scalar_tensors, when given, has one entry per number: a 0-d CPU tensor there replaces an
  // 'f' number's entry in `floats`, which stays there as an ignored placeholder. torch.compile passes a float that changes between calls
  // this way, as a graph input, so that a new value does not recompile the graph.
  //
  // block [0] asks for a forall launch: grid is then [ntasks], and the block size and grid come
  // from the occupancy API when the kernel runs (so a graph or package holds no device facts).
  //
  // The lists that may be empty are optional: AOTInductor's runtime passes an empty list as
  // None. Tagged flexible_layout: the kernel reads strides itself (array descriptors), so
  // inductor need not force the tensors' layout; and without the tag, inductor's record of the
  // call's arguments for a layout-constrained op loses the kernel object (torch 2.11 to 2.15),
  // which fails AOTInductor's compile with "found type 'NoneType'" for `k`.
  m.def(
      "launch(__torch__.torch.classes.cudajit.Kernel k, Tensor(a!)? out0, Tensor(b!)? out1, "
      "Tensor(c!)? out2, Tensor(d!)? out3, Tensor(e!)[]? more_outputs, Tensor[]? inputs, "
      "SymInt[]? ints, float[] floats, str kinds, SymInt[] grid, SymInt[] block, "
      "SymInt shared_mem=0, Tensor?[]? scalar_tensors=None) -> ()",
      {at::Tag::flexible_layout});
}

