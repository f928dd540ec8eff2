// torch_cudajit: <stdint.h> for NVRTC, which ships no C library headers.
#pragma once
#include <cj/cj.cuh>
