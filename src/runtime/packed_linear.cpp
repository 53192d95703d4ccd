#include "spread/runtime/packed_linear.h"

#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#if defined(SPREAD_HAVE_ONEDNN_MATMUL)
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace spread {
namespace {

std::atomic<int64_t> products_run{0};
std::atomic<int> open_scopes{0};

#if defined(SPREAD_HAVE_ONEDNN_MATMUL)

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::desc rows_desc(int64_t rows, int64_t cols) { return memory::desc({rows, cols}, Type::f32, Tag::ab); }

// One weight, packed: the primitive (for any number of rows) and W^T in the layout it reads.
struct Packed {
  explicit Packed(const at::Tensor& w) : weight(w.getIntrusivePtr()) {}
  c10::weak_intrusive_ptr<c10::TensorImpl> weight;  // whose: a weak reference also keeps its address unique
  int64_t version = 0;
  const void* data = nullptr;
  int64_t out = 0, in = 0;
  bool has_bias = false;
  dnnl::matmul primitive;
  memory packed;

  bool serves(const at::Tensor& w, bool bias) const {
    return !weight.expired() && version == int64_t(w._version()) && data == w.data_ptr() && out == w.size(0) &&
           in == w.size(1) && has_bias == bias;
  }
};

std::shared_ptr<Packed> pack(const at::Tensor& weight, bool has_bias) {
  auto p = std::make_shared<Packed>(weight);
  p->version = int64_t(weight._version());
  p->data = weight.data_ptr();
  p->out = weight.size(0), p->in = weight.size(1), p->has_bias = has_bias;
  const memory::desc any_rows_in = rows_desc(DNNL_RUNTIME_DIM_VAL, p->in),
                     any_rows_out = rows_desc(DNNL_RUNTIME_DIM_VAL, p->out);
  const memory::desc packed_any({p->in, p->out}, Type::f32, Tag::any);
  const memory::desc bias = has_bias ? rows_desc(1, p->out) : memory::desc();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(any_rows_in, packed_any, bias, any_rows_out),
                                        cpu_engine());
  p->primitive = dnnl::matmul(pd);
  p->packed = memory(pd.weights_desc(), cpu_engine());
  // W [out, in] row-major is W^T [in, out] in column-major ("ba") order: the reorder reads it in place.
  memory user(memory::desc({p->in, p->out}, Type::f32, Tag::ba), cpu_engine(), const_cast<void*>(p->data));
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(user, p->packed).execute(stream, user, p->packed);
  stream.wait();
  return p;
}

std::mutex cache_mutex;
std::unordered_map<const c10::TensorImpl*, std::shared_ptr<Packed>> cache;

std::shared_ptr<Packed> packed_for(const at::Tensor& weight, bool has_bias) {
  if (open_scopes.load() == 0) return pack(weight, has_bias);
  const std::lock_guard<std::mutex> lock(cache_mutex);
  const auto* key = weight.unsafeGetTensorImpl();
  auto it = cache.find(key);
  if (it != cache.end() && it->second->serves(weight, has_bias)) return it->second;
  for (auto e = cache.begin(); e != cache.end();) e = e->second->weight.expired() ? cache.erase(e) : std::next(e);
  return cache[key] = pack(weight, has_bias);
}

at::Tensor run(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t out = weight.size(0), in = weight.size(1);
  const at::Tensor rows = x.reshape({-1, in}).contiguous();
  auto sizes = x.sizes().vec();
  sizes.back() = out;
  at::Tensor y = at::empty(sizes, x.options());
  if (rows.size(0) == 0) return y;
  const auto p = packed_for(weight.contiguous(), bias.defined());
  const at::Tensor b = bias.defined() ? bias.contiguous() : at::Tensor();
  memory src(rows_desc(rows.size(0), in), cpu_engine(), rows.data_ptr<float>());
  memory dst(rows_desc(rows.size(0), out), cpu_engine(), y.data_ptr<float>());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p->packed}, {DNNL_ARG_DST, dst}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, memory(rows_desc(1, out), cpu_engine(), b.data_ptr<float>()));
  thread_local dnnl::stream stream(cpu_engine());
  p->primitive.execute(stream, args);
  stream.wait();
  ++products_run;
  return y;
}

// A small product against LibTorch's: oneDNN without a kernel for this CPU, or a build whose oneDNN is not the one
// LibTorch loaded, leaves the packed path off.
bool packed_product_works() {
  try {
    const auto x = at::arange(12, at::kFloat).view({3, 4}), w = at::arange(20, at::kFloat).view({5, 4}) - 8.0;
    const auto b = at::arange(5, at::kFloat);
    return at::equal(run(x, w, b), at::linear(x, w, b)) && at::equal(run(x, w, {}), at::linear(x, w));
  } catch (const std::exception&) {
    return false;
  }
}

#endif

void clear_cache() {
#if defined(SPREAD_HAVE_ONEDNN_MATMUL)
  const std::lock_guard<std::mutex> lock(cache_mutex);
  cache.clear();
#endif
}

}  // namespace

PackedWeightsScope::PackedWeightsScope() { ++open_scopes; }

PackedWeightsScope::~PackedWeightsScope() {
  if (--open_scopes == 0) clear_cache();
}

bool has_packed_linear() {
#if defined(SPREAD_HAVE_ONEDNN_MATMUL)
  static const bool works = packed_product_works();
  return works;
#else
  return false;
#endif
}

bool takes_packed_linear(const at::Tensor& x, const at::Tensor& weight, at::ScalarType dtype, bool training) {
  const bool float32_inference = dtype == at::kFloat && !training && !at::GradMode::is_enabled();
  return float32_inference && open_scopes.load() > 0 && x.is_cpu() && x.scalar_type() == at::kFloat &&
         weight.is_cpu() && weight.scalar_type() == at::kFloat && weight.dim() == 2 && has_packed_linear();
}

at::Tensor packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1), "packed_linear: input ", x.sizes(),
              " against weight ", weight.sizes());
#if defined(SPREAD_HAVE_ONEDNN_MATMUL)
  if (has_packed_linear()) return run(x, weight, bias);
#endif
  return at::linear(x, weight, bias);
}

int64_t packed_products_run() { return products_run.load(); }

}  // namespace spread
