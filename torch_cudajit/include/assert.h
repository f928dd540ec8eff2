// torch_cudajit: <assert.h> for NVRTC, which ships no C or C++ library headers.
//
// NVRTC predefines assert() itself (a failed assertion calls the device's __assertfail, which
// prints the condition, file, line and function and traps), but it looks at NDEBUG only on the
// command line (-DNDEBUG). The standard makes assert follow NDEBUG wherever <assert.h> is
// included, so this header, like the real one, has no include guard: each inclusion turns assert
// off when NDEBUG is defined at that point, and back on when it is not. NVRTC's own definition
// is left in place whenever nothing needs to change.
#if defined(__CUDACC_RTC__)

#if defined(NDEBUG)
#undef assert
#define assert(condition) (static_cast<void>(0))
#define CJ_ASSERT_IS_OFF_ 1
#elif defined(CJ_ASSERT_IS_OFF_) || !defined(assert)
#undef assert
#undef CJ_ASSERT_IS_OFF_
// The same call NVRTC's predefined assert makes.
#define assert(condition)                  \
  ((condition) ? static_cast<void>(0)      \
               : __assertfail(#condition, __FILE__, __LINE__, __PRETTY_FUNCTION__, sizeof(char)))
#endif

#endif  // __CUDACC_RTC__
