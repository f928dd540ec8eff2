// torch_cudajit: forall's virtual grid (see virtual_grid.h): which kernels may run on one, how
// many virtual blocks a physical block runs, and the generated wrapper.
#include "virtual_grid.h"

#include "headers.h"
#include "options.h"
#include "tokens.h"

#include <algorithm>
#include <sstream>

namespace torch_cudajit {
namespace {

// Words whose code depends on the physical block or grid, with what they are, for the reason.
struct Refused {
  const char* word;
  const char* what;
};
constexpr Refused kRefusedWords[] = {
    {"__shared__", "shared memory, which virtual blocks of one block would share"},
    {"__syncthreads", "a block barrier, which would wait across virtual blocks"},
    {"barrier", "a barrier, which would wait across virtual blocks"},
    {"bar.sync", "a PTX barrier, which would wait across virtual blocks"},
    {"bar.arrive", "a PTX barrier, which would wait across virtual blocks"},
    {"bar.red", "a PTX barrier, which would wait across virtual blocks"},
    {"cooperative_groups", "cooperative groups, whose groups are physical"},
    {"cluster", "thread block clusters, which are physical"},
    {"ctaid", "PTX's block index registers, which are physical"},
    {"<<<", "a device-side launch"},
    {"cudaLaunch", "a device-side launch"},
    {"exit;", "PTX `exit`, which would end every later virtual block of the thread"},
};

// The first refused word in `text`, as a reason naming `where`.
std::string refused_word(const std::string& text, const std::string& where) {
  for (const Refused& r : kRefusedWords)
    if (text.find(r.word) != std::string::npos)
      return where + " uses " + r.what + " (it mentions `" + r.word + "`)";
  return "";
}

// The first variable in `masked` (a source with comments, strings and preprocessor lines
// blanked) that lives in the module: __constant__ and __managed__ ones, and a __device__
// declaration whose name is followed by `;`, `=` or `[` rather than `(` or `{`.
std::string module_variable(const std::string& masked) {
  const std::vector<detail::Token> tokens = detail::tokenize(masked, 0, masked.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& word = tokens[i].text;
    if (word == "__constant__" || word == "__managed__") return word;
    if (word != "__device__") continue;
    for (size_t j = i + 1; j < tokens.size(); ++j) {
      const std::string& t = tokens[j].text;
      if (t == "(" || t == "{") break;
      if (t == ";" || t == "=" || t == "[") return word;
    }
  }
  return "";
}

}  // namespace

int virtual_blocks_for(const SpecKey& key) {
  size_t narrowest = 0;
  for (uint32_t i = 0; i < key.size; ++i) {
    if (key.args[i].kind != ArgKind::kTensor) continue;
    const size_t size = type_size(key.args[i].dtype);
    if (size > 0 && (narrowest == 0 || size < narrowest)) narrowest = size;
  }
  if (narrowest == 0) return 4;
  return static_cast<int>(std::clamp<size_t>(16 / narrowest, 2, kMaxVirtualBlocks));
}

std::string virtual_grid_refusal(const Program& program, const std::string& kernel_name,
                                 const CompileOptions& options) {
  if (options.debug) return "debug mode checks every access on the physical grid";
  if (!options.link.empty()) return "files linked into it (link=...) are not read";
  if (program.task_loop(kernel_name) != TaskLoop::kOnePerThread)
    return "it loops over the grid itself (cj::for_each or cj::elementwise), and forall "
           "already gives it a throughput launch";
  const UserOptions user = parse_user_options(options.extra);
  if (!user.pre_includes.empty()) return "pre-included files (-include) are not read";
  for (const std::string& macro : user.macros) {
    std::string why = refused_word(macro, "the option " + macro);
    if (!why.empty()) return why;
  }
  // Comments go (a note such as "no __syncthreads needed" refuses nothing); string literals stay,
  // since inline PTX is one.
  std::string why = refused_word(mask_comments(program.source()), "its source");
  if (!why.empty()) return why;
  // The variant is a module of its own: a variable there is not the one kernel.get_global reaches.
  const std::string variable = module_variable(mask_source(program.source()));
  if (!variable.empty())
    return "its source declares a " + variable + " variable, of which the variant's module would "
           "hold a copy of its own";
  if (!detail::includes_only_known_headers(program.source()))
    return "it includes headers from outside CUDA's and torch_cudajit's folders, which are not "
           "read";
  return "";
}

bool virtual_grid_companion(const Param& p, const ArgSig& s) {
  return s.kind == ArgKind::kTensor &&
         (p.kind == ParamKind::kPointer || p.kind == ParamKind::kArray || p.kind == ParamKind::kAuto);
}

std::string virtual_grid_name(const std::string& tag) { return "cj_detail_virtual_" + tag; }

std::string virtual_grid_wrapper(const KernelDecl& decl, const SpecKey& key,
                                 const Instantiation& inst, const std::string& tag, int blocks) {
  TORCH_INTERNAL_ASSERT(key.size == decl.params.size() && blocks >= 1);
  // The alias of the instantiation (cj_detail_spec_<tag>) names the resolved parameter types.
  const std::string alias = "cj_detail_spec_" + tag;
  std::ostringstream params, companions, call, prefetch;
  int companion = 0;
  for (size_t i = 0; i < decl.params.size(); ++i) {
    const std::string type = alias + "::arg<" + std::to_string(i) + ">";
    params << (i ? ", " : "") << type << " cj_p" << i;
    call << (i ? ", " : "");
    if (virtual_grid_companion(decl.params[i], key.args[i])) {
      companions << ", ::cj::detail::restrict_t<" << type << "> cj_r" << i;
      call << "::cj::detail::with_data(cj_p" << i << ", cj_r" << i << ")";
      if (companion < kMaxPrefetched)
        prefetch << "    if (cj_prefetch & (1u << " << companion << ")) cj_zero |= "
                 << "::cj::detail::prefetch_ahead<" << blocks << ">(cj_r" << i
                 << ", cj_tasks, cj_ahead);\n";
      ++companion;
    } else {
      call << "cj_p" << i;
    }
  }
  std::ostringstream os;
  os << "extern \"C\" __global__ void " << virtual_grid_name(tag) << "(" << params.str()
     << companions.str() << (decl.params.empty() ? "" : ", ")
     << "unsigned int cj_grid, unsigned long long cj_tasks, unsigned int cj_prefetch, "
        "unsigned int cj_ahead) {\n";
  os << "  ::cj::detail::run_virtual_blocks<" << blocks << ">(cj_grid, [&]() {\n"
     << "    unsigned int cj_zero = 0;\n" << prefetch.str() << "    return cj_zero;\n  }, [&]() { "
     << inst.kernel_expression << "(" << call.str() << "); });\n}\n";
  return os.str();
}

std::shared_ptr<const KernelWrapping> virtual_grid_wrapping(int blocks) {
  auto wrapping = std::make_shared<KernelWrapping>();
  wrapping->macros = "#define CJ_VIRTUAL_GRID 1\n";
  wrapping->prologue = kVirtualGridPrologue;
  wrapping->epilogue = kVirtualGridEpilogue;
  wrapping->wrap = [blocks](const KernelDecl& decl, const SpecKey& key, const std::string& tag,
                            Instantiation& inst) {
    std::string text = virtual_grid_wrapper(decl, key, inst, tag, blocks);
    inst.kernel_expression = virtual_grid_name(tag);
    return text;
  };
  return wrapping;
}

const char* const kVirtualGridPrologue =
    "#undef __global__\n"
    "#define __global__ __device__ __forceinline__\n"
    "#undef __launch_bounds__\n"
    "#define __launch_bounds__(...)\n"
    "#undef __grid_constant__\n"
    "#define __grid_constant__\n"
    "#define blockIdx (::cj::detail::virtual_block_idx())\n"
    "#define gridDim (::cj::detail::virtual_grid_dim())\n"
    "#define blockDim (::cj::detail::virtual_block_dim())\n";

const char* const kVirtualGridEpilogue =
    "\n#undef blockIdx\n"
    "#undef gridDim\n"
    "#undef blockDim\n"
    "#undef __global__\n"
    "#define __global__ __location__(global)\n";

}  // namespace torch_cudajit
