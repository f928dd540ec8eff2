// torch_cudajit: the specialization table (see specialization_table.h): building a
// specialization's parameter slots, compiling (or adopting) on a miss, and the virtual-grid
// variants.
#include "specialization_table.h"

#include "arg.h"
#include "log.h"
#include "virtual_grid.h"

#include <algorithm>
#include <chrono>

namespace torch_cudajit {
namespace {

uint32_t align_up(uint32_t v, uint32_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

std::atomic<BlockingRunner> g_blocking_runner{nullptr};

// Runs `work` through the runner set_blocking_runner installed, or directly without one.
void run_blocking(const std::function<void()>& work) {
  if (BlockingRunner runner = g_blocking_runner.load())
    runner(work);
  else
    work();
}

// What the log says a compile request came to.
const char* outcome_text(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::kHit: return "disk cache hit";
    case CacheOutcome::kMiss: return "compiled, stored in the disk cache";
    case CacheOutcome::kReceived:
      return "compiled by another rank of the job, received through its store, stored in the disk cache";
    case CacheOutcome::kBypassed: break;
  }
  return "compiled (disk cache not used)";
}

}  // namespace

void set_blocking_runner(BlockingRunner runner) { g_blocking_runner.store(runner); }

using detail::kind_name;

std::shared_ptr<Specialization> SpecializationTable::lookup(const SpecKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = table_.find(key);
  if (it == table_.end()) return nullptr;
  if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
  return it->second.get();
}

Specialization::Slot SpecializationTable::slot_for(uint32_t i, const ParamProbe& pr, const ArgSig& s,
                                          uint32_t& offset) const {
  const Param& p = def_.decl().params[i];
  Specialization::Slot slot{};
  // A pointer's probe describes its pointee; the pointer itself is 8 bytes.
  const bool pointer = p.kind == ParamKind::kPointer;
  slot.code = pointer ? TypeCode::kPointer : pr.code;
  slot.rank = s.rank;
  slot.size = pointer ? uint32_t(sizeof(void*)) : pr.size;
  slot.offset = offset = align_up(offset, pointer ? uint32_t(alignof(void*)) : pr.align);
  offset += slot.size;
  switch (s.kind) {
    case ArgKind::kTensor:
      // The parameter's declared kind decides; the probe confirms the size.
      if (p.kind == ParamKind::kArray || p.kind == ParamKind::kAuto) {
        slot.op = PackOp::kArray;
        TORCH_INTERNAL_ASSERT(pr.size == cj::abi::array_bytes(s.rank), "Array size ", pr.size);
      } else if (pointer) {
        slot.op = PackOp::kPointer;
        // A concrete pointee that is a dtype (a typedef such as scalar_t) must be the tensor's.
        if (static_cast<int>(pr.code) >= 0 && pr.code != s.dtype)
          TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' (", p.type,
                           ") of kernel '", def_.decl().name, "' points to ", dtype_name(pr.code),
                           " elements (`", p.element, "` is ", cpp_type_name(pr.code),
                           "); got a tensor of dtype ", dtype_name(s.dtype), ".");
        // A vector or struct pointee asks more of the data than the dtype gives.
        const uint32_t elem = static_cast<uint32_t>(type_size(s.dtype));
        if (pr.size > 0 && (pr.size != elem || pr.align > elem)) {
          slot.pointee_size = pr.size;
          slot.pointee_align = pr.align;
        }
      } else {
        slot.op = PackOp::kTensorScalar;
      }
      break;
    case ArgKind::kAddress:
      slot.op = PackOp::kAddress;
      if (pr.align > 1) {
        slot.pointee_size = pr.size;
        slot.pointee_align = pr.align;
      }
      break;
    case ArgKind::kInt: slot.op = PackOp::kInt; break;
    case ArgKind::kFloat: slot.op = PackOp::kFloat; break;
    case ArgKind::kBool: slot.op = PackOp::kBool; break;
    case ArgKind::kComplex: slot.op = PackOp::kComplex; break;
    case ArgKind::kBytes: slot.op = PackOp::kBytes; break;
    case ArgKind::kTag: slot.op = PackOp::kTag; break;
    case ArgKind::kNone: TORCH_INTERNAL_ASSERT(false, "kNone in a key");
  }
  slot.written = (slot.op == PackOp::kArray || slot.op == PackOp::kPointer) && may_write(p);
  bool numeric = s.kind == ArgKind::kInt || s.kind == ArgKind::kFloat ||
                 s.kind == ArgKind::kBool || s.kind == ArgKind::kComplex ||
                 slot.op == PackOp::kTensorScalar;
  if (numeric && static_cast<int>(pr.code) < 0)
    TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' of kernel '", def_.decl().name,
                     "' has type `", p.type, "`, which a Python ", kind_name(s.kind),
                     " cannot be converted to; pass such a value through an extension.");
  if (s.kind == ArgKind::kFloat && is_integer(pr.code))
    TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' of kernel '", def_.decl().name,
                     "' is an integer (", dtype_name(pr.code), "); got a Python float.");
  if (s.kind == ArgKind::kComplex && !is_complex(pr.code))
    TORCH_CHECK_TYPE(false, "torch_cudajit: parameter '", p.name, "' of kernel '", def_.decl().name,
                     "' is ", dtype_name(pr.code), "; got a Python complex.");
  return slot;
}

std::shared_ptr<Specialization> SpecializationTable::build(
    const SpecKey& key, const std::shared_ptr<const CompiledProgram>& compiled, size_t index) const {
  auto spec = std::make_shared<Specialization>();
  spec->key = key;
  spec->kernel_name = def_.decl().name;
  spec->signature = describe_signature(def_.decl(), key);
  spec->compiled = compiled;
  spec->lowered_name = compiled->lowered_names[index];
  spec->name_expression = compiled->name_expressions[index];
  spec->probes = compiled->probes[index];
  spec->prebuilt = def_.options().prebuilt != nullptr;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < key.size; ++i)
    spec->slots.push_back(slot_for(i, spec->probes[i], key.args[i], offset));
  spec->buffer_size = offset;
  spec->writes_tensors = std::any_of(spec->slots.begin(), spec->slots.end(),
                                     [](const Specialization::Slot& s) { return s.written; });
  return spec;
}

std::vector<std::shared_ptr<Specialization>> SpecializationTable::compile_many(const std::vector<SpecKey>& keys) {
  std::vector<std::shared_ptr<Specialization>> out(keys.size());
  std::vector<size_t> todo;
  std::vector<std::promise<std::shared_ptr<Specialization>>> promises;
  std::vector<std::shared_future<std::shared_ptr<Specialization>>> waits(keys.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto it = table_.find(keys[i]);
      if (it != table_.end()) {
        waits[i] = it->second;
        continue;
      }
      promises.emplace_back();
      auto fut = promises.back().get_future().share();
      table_.emplace(keys[i], fut);
      waits[i] = fut;
      todo.push_back(i);
    }
  }
  if (!todo.empty()) {
    // Compile outside the lock: other keys stay launchable, equal keys wait on the future.
    try {
      // The keys of one architecture compile together.
      std::vector<std::shared_ptr<Specialization>> built(todo.size());
      std::vector<bool> done(todo.size(), false);
      for (size_t first = 0; first < todo.size(); ++first) {
        if (done[first]) continue;
        std::vector<size_t> group;
        std::vector<SpecKey> group_keys;
        for (size_t j = first; j < todo.size(); ++j)
          if (!done[j] && keys[todo[j]].arch == keys[todo[first]].arch) {
            group.push_back(j);
            group_keys.push_back(keys[todo[j]]);
          }
        const std::vector<CompiledInstance> got = compile_instances(group_keys);
        for (size_t g = 0; g < group.size(); ++g) {
          count(got[g].outcome);
          built[group[g]] = build(group_keys[g], got[g].compiled, got[g].index);
          done[group[g]] = true;
        }
      }
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t j = 0; j < todo.size(); ++j) {
        order_.push_back(built[j]);
        promises[j].set_value(built[j]);
      }
    } catch (...) {
      // Forget the failed keys so a later call compiles (and reports) again.
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t j = 0; j < todo.size(); ++j) {
        table_.erase(keys[todo[j]]);
        promises[j].set_exception(std::current_exception());
      }
      throw;
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) out[i] = waits[i].get();
  return out;
}

void SpecializationTable::explain_complex_failure(const SpecKey& key, const CompileOptions& opts) const {
  for (uint32_t i = 0; i < key.size; ++i) {
    if (key.args[i].kind != ArgKind::kComplex || def_.decl().params[i].kind != ParamKind::kScalar ||
        def_.bindings()[i].scalar != TypeCode::kUnknown)
      continue;
    SpecKey as_real = key;
    as_real.args[i].kind = ArgKind::kFloat;
    try {
      def_.program().compile({{def_.decl().name, as_real, def_.options().template_args}}, opts);
    } catch (const CompileError&) {
      continue;  // something else fails too: the compile error stands
    }
    detail::param_type_error(def_.decl(), i, "cannot take a Python complex: for these arguments its type is a real one. "
                  "Pass a real number, or complex tensors so that it becomes complex.");
  }
}

void SpecializationTable::explain_address_failure(const SpecKey& key) const {
  // Explicit template arguments may give the element type: the compile error stands then.
  if (!def_.options().template_args.empty()) return;
  const std::vector<std::string> template_names = def_.decl().template_param_names();
  for (uint32_t i = 0; i < key.size; ++i) {
    const Param& p = def_.decl().params[i];
    if (key.args[i].kind != ArgKind::kAddress || !p.element_dependent) continue;
    for (const std::string& name : identifiers_of(p.element)) {
      if (std::find(template_names.begin(), template_names.end(), name) == template_names.end())
        continue;
      // Another argument that is no address may deduce it.
      bool elsewhere = false;
      for (uint32_t j = 0; j < key.size && !elsewhere; ++j) {
        if (j == i || key.args[j].kind == ArgKind::kAddress) continue;
        for (const std::string& id : identifiers_of(def_.decl().params[j].type))
          elsewhere = elsewhere || id == name;
      }
      if (!elsewhere)
        detail::param_type_error(def_.decl(), i, "got an address (None or a cj.DevicePointer), which has no element type, "
                      "and its template parameter '" + name + "' appears in no other "
                      "parameter, so nothing else can deduce it. Pass a tensor of the element "
                      "type (an empty one will do), or give '" + name +
                      "' with cj.jit(..., template_args=...).");
    }
  }
}

std::vector<CompiledInstance> SpecializationTable::compile_instances(const std::vector<SpecKey>& keys) const {
  TORCH_INTERNAL_ASSERT(!keys.empty());
  // A prebuilt image holds the one kernel every key launches.
  if (def_.options().prebuilt)
    return std::vector<CompiledInstance>(keys.size(), {def_.options().prebuilt, 0, CacheOutcome::kBypassed});
  TORCH_CHECK_VALUE(def_.template_problem().empty(), def_.template_problem());
  CompileOptions opts = def_.compile_options();
  opts.arch = keys[0].arch;
  std::vector<InstantiationRequest> requests;
  for (const SpecKey& key : keys) {
    TORCH_INTERNAL_ASSERT(key.arch == opts.arch, "keys of several architectures in one compile");
    requests.push_back({def_.decl().name, key, def_.options().template_args});
  }
  try {
    const long long start = detail::now_ns();
    std::vector<CompiledInstance> got =
        compile_cached(def_.program(), requests, opts, def_.options().cache);
    if (detail::log_enabled(LogLevel::kInfo)) {
      const std::string took = detail::elapsed_ms(start);
      for (size_t i = 0; i < keys.size(); ++i)
        detail::log(LogLevel::kInfo,
                    "kernel '" + def_.decl().qualified_name + "' " +
                        describe_signature(def_.decl(), keys[i]) + " for sm_" +
                        std::to_string(opts.arch) + ": " +
                        outcome_text(got[i].outcome) +
                        ", " + took + (keys.size() > 1 ? " for " + std::to_string(keys.size()) +
                                                             " specializations together"
                                                       : ""));
    }
    return got;
  } catch (const CompileError&) {
    // A clearer error than the compiler's, when the arguments explain the failure.
    for (const SpecKey& key : keys) {
      explain_address_failure(key);
      explain_complex_failure(key, opts);
    }
    throw;
  }
}

std::vector<CompiledInstance> SpecializationTable::compile_detached(const std::vector<SpecKey>& keys) const {
  TORCH_CHECK_VALUE(!def_.options().prebuilt, "torch_cudajit: kernel '", def_.decl().name,
                    "' is prebuilt code (torch_cudajit.load); there is nothing to compile.");
  return compile_instances(keys);
}

namespace {
bool same_compile(const CompileOptions& a, const CompileOptions& b) {
  return a.extra == b.extra && a.std == b.std && a.debug == b.debug && a.lineinfo == b.lineinfo &&
         a.link == b.link;
}
}  // namespace

std::vector<std::shared_ptr<Specialization>> SpecializationTable::compile_together(
    const std::vector<std::pair<SpecializationTable*, SpecKey>>& entries) {
  // Batches of entries that one NVRTC program can hold; the rest compile alone below.
  std::vector<bool> batched(entries.size(), false);
  for (size_t first = 0; first < entries.size(); ++first) {
    const auto& [table, key] = entries[first];
    const KernelDefinition& def = table->def_;
    if (batched[first] || def.options().prebuilt || !def.template_problem().empty() ||
        table->lookup(key))
      continue;
    const CompileOptions opts = def.compile_options();
    std::vector<size_t> members;
    std::vector<InstantiationRequest> requests;
    for (size_t j = first; j < entries.size(); ++j) {
      const auto& [other, other_key] = entries[j];
      const KernelDefinition& od = other->def_;
      if (batched[j] || &od.program() != &def.program() || other_key.arch != key.arch ||
          od.options().prebuilt || !od.template_problem().empty() ||
          od.options().cache != def.options().cache || !same_compile(od.compile_options(), opts))
        continue;
      bool repeated = false;  // the same kernel and key twice: compiled once
      for (size_t m : members)
        repeated = repeated || (entries[m].first == other && entries[m].second == other_key);
      batched[j] = true;
      if (repeated || other->lookup(other_key)) continue;
      members.push_back(j);
      requests.push_back({od.decl().name, other_key, od.options().template_args});
    }
    if (members.size() < 2) continue;
    CompileOptions batch_opts = opts;
    batch_opts.arch = key.arch;
    std::vector<CompiledInstance> got;
    try {
      const long long start = detail::now_ns();
      got = compile_cached(def.program(), requests, batch_opts, def.options().cache);
      if (detail::log_enabled(LogLevel::kInfo))
        detail::log(LogLevel::kInfo, "kernels " + detail::kernel_names(requests) + " of '" +
                                         def.program().filename() + "' for sm_" +
                                         std::to_string(key.arch) + ": " +
                                         std::to_string(requests.size()) +
                                         " specializations together, " + detail::elapsed_ms(start));
    } catch (const std::exception&) {
      continue;  // each compiles alone below and raises its own error
    }
    for (size_t m = 0; m < members.size(); ++m)
      entries[members[m]].first->adopt(entries[members[m]].second, got[m].compiled, got[m].index,
                                       got[m].outcome);
  }
  std::vector<std::shared_ptr<Specialization>> out;
  out.reserve(entries.size());
  for (const auto& [table, key] : entries) out.push_back(table->get(key));
  return out;
}

void SpecializationTable::count(CacheOutcome outcome) {
  if (outcome == CacheOutcome::kHit) counters_.hits++;
  if (outcome == CacheOutcome::kMiss || outcome == CacheOutcome::kReceived) counters_.misses++;
}

std::shared_ptr<Specialization> SpecializationTable::adopt(const SpecKey& key,
                                                  std::shared_ptr<const CompiledProgram> compiled,
                                                  size_t index, CacheOutcome outcome) {
  TORCH_INTERNAL_ASSERT(compiled && index < compiled->lowered_names.size() &&
                            compiled->probes.size() == compiled->lowered_names.size() &&
                            compiled->probes[index].size() == key.size,
                        "adopt: instantiation ", index, " with ", key.size, " parameters expected");
  count(outcome);
  std::shared_ptr<Specialization> spec = build(key, compiled, index);
  std::shared_future<std::shared_ptr<Specialization>> existing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(key);
    if (it == table_.end()) {
      std::promise<std::shared_ptr<Specialization>> ready;
      ready.set_value(spec);
      table_.emplace(key, ready.get_future().share());
      order_.push_back(spec);
      return spec;
    }
    existing = it->second;
  }
  // Compiled (or being compiled) here meanwhile: keep that one. Waiting outside the lock lets
  // the compiling thread finish.
  return existing.get();
}

std::shared_ptr<Specialization> SpecializationTable::adopt_foreign(
    const SpecKey& key, std::shared_ptr<const CompiledProgram> compiled, const char* origin) {
  check_key(def_.decl(), key, origin);
  auto fail = [&](const std::string& what) {
    TORCH_CHECK_VALUE(false, "torch_cudajit: ", origin, " of kernel '", def_.decl().name, "' ", what,
                      "; it is damaged or belongs to another kernel.");
  };
  if (compiled->lowered_names.size() != 1 || compiled->probes.size() != 1 ||
      compiled->name_expressions.size() != 1 || compiled->probes[0].size() != key.size)
    fail("does not hold one instantiation with " + std::to_string(key.size) + " parameter(s)");
  if (compiled->has_cubin ? compiled->cubin.empty() : compiled->ptx.empty())
    fail("holds no " + std::string(compiled->has_cubin ? "CUBIN" : "PTX"));
  // sm_XX machine code must be for the key's architecture; compute_XX PTX for it or older.
  const std::string& t = compiled->target;
  const bool sm = t.rfind("sm_", 0) == 0, compute = t.rfind("compute_", 0) == 0;
  const int target_arch = sm ? std::atoi(t.c_str() + 3) : compute ? std::atoi(t.c_str() + 8) : 0;
  if (target_arch <= 0 || (sm && target_arch != key.arch) || (compute && target_arch > key.arch))
    fail("was compiled for '" + t + "', not for sm_" + std::to_string(key.arch));
  const std::string expected =
      def_.program().instantiations({{def_.decl().name, key, def_.options().template_args}})[0].kernel_expression;
  if (compiled->name_expressions[0] != expected)
    fail("instantiates '" + compiled->name_expressions[0] + "', but its key asks for '" +
         expected + "'");
  for (uint32_t i = 0; i < key.size; ++i) {
    const ParamProbe& pr = compiled->probes[0][i];
    const ArgSig& s = key.args[i];
    const ParamKind kind = def_.decl().params[i].kind;
    const bool array = s.kind == ArgKind::kTensor && (kind == ParamKind::kArray || kind == ParamKind::kAuto);
    const bool pow2 = pr.align != 0 && (pr.align & (pr.align - 1)) == 0;
    // A pointer's probe describes its pointee: 0 and 0 for void, else any size of whole
    // alignment units.
    const bool bad = kind == ParamKind::kPointer
                         ? (pr.size == 0) != (pr.align == 0) || (pr.size != 0 && (!pow2 || pr.size % pr.align != 0))
                         : (array && pr.size != cj::abi::array_bytes(s.rank)) || !pow2 || pr.size > 4096;
    if (bad)
      fail("reports a size of " + std::to_string(pr.size) + " and alignment " +
           std::to_string(pr.align) + " for parameter '" + def_.decl().params[i].name + "'");
  }
  return adopt(key, std::move(compiled), 0, CacheOutcome::kBypassed);
}

std::shared_ptr<Specialization> SpecializationTable::get(const SpecKey& key) {
  if (auto hit = lookup(key)) return hit;
  return compile_many({key})[0];
}

std::shared_ptr<Specialization> SpecializationTable::get_virtual(const SpecKey& key) {
  if (!def_.virtual_grid_refusal().empty()) return nullptr;
  std::promise<std::shared_ptr<Specialization>> promise;
  std::shared_future<std::shared_ptr<Specialization>> existing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = virtual_.find(key);
    if (it != virtual_.end())
      existing = it->second;
    else
      virtual_.emplace(key, promise.get_future().share());
  }
  // Compiled, or being compiled by another thread: wait outside the lock.
  if (existing.valid()) return existing.get();
  std::shared_ptr<Specialization> spec;
  std::string failure;
  try {
    CompileOptions opts = def_.compile_options();
    opts.arch = key.arch;
    const int blocks = virtual_blocks_for(key);
    InstantiationRequest request{def_.decl().name, key, def_.options().template_args,
                                 virtual_grid_wrapping(blocks)};
    const CompiledInstance got = compile_cached(def_.program(), {request}, opts, def_.options().cache)[0];
    count(got.outcome);
    spec = build(key, got.compiled, got.index);
    spec->virtual_blocks = blocks;
    uint32_t offset = (spec->buffer_size + 7u) / 8u * 8u;
    spec->companion_offset = offset;
    for (uint32_t i = 0; i < key.size; ++i)
      if (virtual_grid_companion(def_.decl().params[i], key.args[i])) spec->companions.push_back(i);
    // The companions, then the task count (8 bytes), grid size, prefetch mask and distance.
    spec->buffer_size = offset + 8u * static_cast<uint32_t>(spec->companions.size()) + 20u;
  } catch (const CompileError& e) {
    // The plain kernel compiled, so what fails is the virtual grid's reading of the text (an
    // attribute a __device__ function cannot have, a header that declares blockIdx itself):
    // forall launches the plain kernel instead.
    failure = "its virtual-grid variant does not compile: " + detail::first_error(e.log());
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    virtual_.erase(key);
    promise.set_exception(std::current_exception());
    throw;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure.empty()) virtual_failures_[key] = failure;
  }
  promise.set_value(spec);
  return spec;
}

std::string SpecializationTable::virtual_grid_failure(const SpecKey& key) const {
  if (!def_.virtual_grid_refusal().empty()) return def_.virtual_grid_refusal();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = virtual_failures_.find(key);
  return it == virtual_failures_.end() ? "" : it->second;
}

std::vector<std::shared_ptr<Specialization>> SpecializationTable::specializations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return order_;
}

Specialization* SpecializationTable::virtual_variant(Specialization& spec) {
  if (!spec.virtual_looked_up_.load(std::memory_order_acquire)) {
    // The runner may release the GIL; it must do so before call_once waits on another thread's
    // compile, or that thread could not take the GIL back to return.
    run_blocking([&] {
      std::call_once(spec.virtual_once_, [&] { spec.virtual_variant_ = get_virtual(spec.key); });
    });
    spec.virtual_looked_up_.store(true, std::memory_order_release);
  }
  return spec.virtual_variant_.get();
}

}  // namespace torch_cudajit
