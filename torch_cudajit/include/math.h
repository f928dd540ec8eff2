// torch_cudajit: <math.h> for NVRTC, which ships no C or C++ library headers.
//
// The C math functions themselves are NVRTC built-ins in the global namespace already. This
// header provides the rest of what a C++ <math.h> gives in the global namespace: the macros
// (INFINITY, NAN, HUGE_VAL, FP_*, M_PI, ...), the classification and comparison functions
// (fpclassify, isnormal, isless, ...) and the overloads for integer and mixed arguments. It
// includes <cmath> and hoists those names out of std, as libstdc++'s <math.h> does. nvcc
// includes the host <math.h> into every .cu file, so torch_cudajit's implicit prelude includes
// this header too.
#pragma once

#if defined(__CUDACC_RTC__)

#include "cmath"

using std::fpclassify;
using std::isnormal;
using std::isgreater;
using std::isgreaterequal;
using std::isless;
using std::islessequal;
using std::islessgreater;
using std::isunordered;

// The integer and mixed-argument overloads (the float and double ones are these very built-ins).
using std::fabs;
using std::exp;
using std::exp2;
using std::expm1;
using std::log;
using std::log10;
using std::log2;
using std::log1p;
using std::sqrt;
using std::cbrt;
using std::sin;
using std::cos;
using std::tan;
using std::asin;
using std::acos;
using std::atan;
using std::sinh;
using std::cosh;
using std::tanh;
using std::asinh;
using std::acosh;
using std::atanh;
using std::erf;
using std::erfc;
using std::tgamma;
using std::lgamma;
using std::ceil;
using std::floor;
using std::trunc;
using std::round;
using std::nearbyint;
using std::rint;
using std::logb;
using std::lround;
using std::llround;
using std::lrint;
using std::llrint;
using std::ilogb;
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;
using std::fmod;
using std::remainder;
using std::fmax;
using std::fmin;
using std::fdim;
using std::pow;
using std::hypot;
using std::atan2;
using std::nextafter;
using std::copysign;
using std::fma;

#endif  // __CUDACC_RTC__
