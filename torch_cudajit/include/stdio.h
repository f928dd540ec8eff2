// torch_cudajit: <stdio.h> for NVRTC, which ships no C or C++ library headers.
//
// The only <stdio.h> function device code has is printf, and NVRTC already declares it in the
// global namespace, so there is nothing to add here: the header exists so that code that
// includes it compiles. (nvcc includes the host <stdio.h> into every .cu file, which is why
// kernels call printf without including anything; under NVRTC that works as it is.)
#pragma once
