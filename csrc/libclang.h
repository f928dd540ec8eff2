// torch_cudajit: libclang, opened at run time. Its C API is stable across LLVM releases, so the
// plugin opens whichever libclang it finds (TORCH_CUDAJIT_LIBCLANG, the path the Python package
// sets from the `libclang` wheel, or the system's) and declares the few entry points and
// plain-data types the front end (frontend.cpp) uses: it neither links LLVM nor needs its
// headers to build.
#pragma once

#include <cstddef>
#include <string>

namespace torch_cudajit::detail {

// The C API's value types, field for field as clang-c/Index.h declares them.
struct CXString {
  const void* data;
  unsigned private_flags;
};
struct CXCursor {
  int kind;
  int xdata;
  const void* data[3];
};
struct CXType {
  int kind;
  void* data[2];
};
struct CXSourceLocation {
  const void* ptr_data[2];
  unsigned int_data;
};
struct CXSourceRange {
  const void* ptr_data[2];
  unsigned begin_int_data;
  unsigned end_int_data;
};
struct CXUnsavedFile {
  const char* filename;
  const char* contents;
  unsigned long length;
};
using CXIndex = void*;
using CXTranslationUnit = void*;
using CXFile = void*;
using CXClientData = void*;
using CXCursorVisitor = int (*)(CXCursor, CXCursor, CXClientData);
using CXInclusionVisitor = void (*)(CXFile, CXSourceLocation*, unsigned, CXClientData);
using CXFieldVisitor = int (*)(CXCursor, CXClientData);

// Enumerator values of clang-c/Index.h.
constexpr int kCursorFunctionDecl = 8, kCursorParmDecl = 10,
              kCursorNamespace = 22, kCursorLinkageSpec = 23, kCursorTemplateTypeParameter = 27,
              kCursorNonTypeTemplateParameter = 28, kCursorTemplateTemplateParameter = 29,
              kCursorFunctionTemplate = 30, kCursorUnexposedDecl = 1,
              kCursorCudaGlobalAttr = 414;
constexpr int kCursorStructDecl = 2, kCursorUnionDecl = 3, kCursorClassDecl = 4,
              kCursorVarDecl = 9, kCursorCXXMethod = 21, kCursorConstructor = 24,
              kCursorDestructor = 25, kCursorConversionFunction = 26, kCursorClassTemplate = 31,
              kCursorClassTemplatePartialSpecialization = 32, kCursorCudaConstantAttr = 412,
              kCursorCudaDeviceAttr = 413, kCursorCudaSharedAttr = 416,
              kCursorInclusionDirective = 503, kCursorFriendDecl = 603;
constexpr int kTypeInvalid = 0, kTypeConstantArray = 112, kTypeIncompleteArray = 114;
constexpr int kVisitBreak = 0, kVisitContinue = 1;
constexpr unsigned kParseIncomplete = 0x02, kParseForSerialization = 0x10,
                   kParseSkipFunctionBodies = 0x40, kParseKeepGoing = 0x200;
constexpr int kDiagnosticError = 3, kDiagnosticFatal = 4;

#define CJ_LIBCLANG_FUNCTIONS(X)                                                                  \
  X(clang_createIndex, CXIndex (*)(int, int))                                                     \
  X(clang_parseTranslationUnit2,                                                                  \
    int (*)(CXIndex, const char*, const char* const*, int, CXUnsavedFile*, unsigned, unsigned,    \
            CXTranslationUnit*))                                                                  \
  X(clang_disposeTranslationUnit, void (*)(CXTranslationUnit))                                    \
  X(clang_reparseTranslationUnit, int (*)(CXTranslationUnit, unsigned, CXUnsavedFile*, unsigned)) \
  X(clang_getTranslationUnitCursor, CXCursor (*)(CXTranslationUnit))                              \
  X(clang_visitChildren, unsigned (*)(CXCursor, CXCursorVisitor, CXClientData))                   \
  X(clang_getCursorKind, int (*)(CXCursor))                                                       \
  X(clang_getCursorSpelling, CXString (*)(CXCursor))                                              \
  X(clang_getCString, const char* (*)(CXString))                                                  \
  X(clang_disposeString, void (*)(CXString))                                                      \
  X(clang_getCursorExtent, CXSourceRange (*)(CXCursor))                                           \
  X(clang_getCursorLocation, CXSourceLocation (*)(CXCursor))                                      \
  X(clang_getRangeStart, CXSourceLocation (*)(CXSourceRange))                                     \
  X(clang_getRangeEnd, CXSourceLocation (*)(CXSourceRange))                                       \
  X(clang_getFileLocation, void (*)(CXSourceLocation, CXFile*, unsigned*, unsigned*, unsigned*))  \
  X(clang_getSpellingLocation,                                                                    \
    void (*)(CXSourceLocation, CXFile*, unsigned*, unsigned*, unsigned*))                         \
  X(clang_getCursorType, CXType (*)(CXCursor))                                                    \
  X(clang_getTypeSpelling, CXString (*)(CXType))                                                  \
  X(clang_isInvalidDeclaration, unsigned (*)(CXCursor))                                           \
  X(clang_getFile, CXFile (*)(CXTranslationUnit, const char*))                                   \
  X(clang_saveTranslationUnit, int (*)(CXTranslationUnit, const char*, unsigned))                \
  X(clang_getNumDiagnostics, unsigned (*)(CXTranslationUnit))                                     \
  X(clang_getDiagnostic, void* (*)(CXTranslationUnit, unsigned))                                  \
  X(clang_getDiagnosticSeverity, int (*)(void*))                                                  \
  X(clang_getDiagnosticSpelling, CXString (*)(void*))                                             \
  X(clang_getDiagnosticLocation, CXSourceLocation (*)(void*))                                     \
  X(clang_disposeDiagnostic, void (*)(void*))                                                     \
  X(clang_getClangVersion, CXString (*)())                                                        \
  X(clang_getInclusions, void (*)(CXTranslationUnit, CXInclusionVisitor, CXClientData))           \
  X(clang_getFileName, CXString (*)(CXFile))                                                      \
  X(clang_formatDiagnostic, CXString (*)(void*, unsigned))                                        \
  X(clang_getIncludedFile, CXFile (*)(CXCursor))                                                  \
  X(clang_isConstQualifiedType, unsigned (*)(CXType))                                             \
  X(clang_getArrayElementType, CXType (*)(CXType))                                                \
  X(clang_isCursorDefinition, unsigned (*)(CXCursor))                                             \
  X(clang_getCursorAvailability, int (*)(CXCursor))                                               \
  X(clang_CXXMethod_isDefaulted, unsigned (*)(CXCursor))                                          \
  X(clang_getTypedefDeclUnderlyingType, CXType (*)(CXCursor))                                     \
  X(clang_getCanonicalType, CXType (*)(CXType))                                                   \
  X(clang_Type_getSizeOf, long long (*)(CXType))                                                  \
  X(clang_Type_getAlignOf, long long (*)(CXType))                                                 \
  X(clang_Type_visitFields, unsigned (*)(CXType, CXFieldVisitor, CXClientData))                   \
  X(clang_Cursor_getOffsetOfField, long long (*)(CXCursor))                                       \
  X(clang_getArraySize, long long (*)(CXType))

struct LibclangApi {
#define CJ_DECLARE_CLANG(name, type) \
  using name##_type = type;          \
  name##_type name = nullptr;
  CJ_LIBCLANG_FUNCTIONS(CJ_DECLARE_CLANG)
#undef CJ_DECLARE_CLANG
  /// The bytes Clang read of a file (LLVM 16 and newer; nullptr in older libclang, where the
  /// front end reads the file again instead).
  const char* (*clang_getFileContents)(CXTranslationUnit, CXFile, size_t*) = nullptr;
  std::string path;
};

/// The entry points of the libclang found first, loaded once; throws c10::Error naming the
/// candidates tried and what to install when none loads.
const LibclangApi& libclang();
/// A CXString's text; the string is disposed of.
std::string take(CXString s);

}  // namespace torch_cudajit::detail

namespace torch_cudajit {

/// Uses this libclang shared library (the Python package passes the `libclang` wheel's copy).
/// TORCH_CUDAJIT_LIBCLANG, when set, still comes first.
void set_libclang_path(const std::string& path);

/// The libclang the loader would open first, by path, size and time, computed without loading
/// it; "" when it can only be named by a bare library name (or none is found). A reflection
/// record keeps the identity it was read with: another libclang reads the source again, and a
/// process with none to be found uses the record (reading.h).
std::string libclang_identity();

/// The loaded libclang's version string ("clang version 18.1.1 ..."); loads it if needed.
std::string libclang_version();

}  // namespace torch_cudajit
