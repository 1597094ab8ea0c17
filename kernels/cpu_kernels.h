// CPU versions of the reference trainer's operations. Row-major fp32 throughout.
// Every function runs its work on the given ThreadPool and returns when the work is done;
// results do not depend on timing (a fixed partition of work for a given pool size), so
// a run with the same thread count is bit-reproducible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace rankscope::kernels {

// A fixed pool of worker threads. The calling thread takes part, so a pool of size 1
// has no worker thread at all.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;
  // Runs task(i) for every i in [0, tasks) and returns when all have finished. Tasks are
  // handed out statically (task i always runs on the same pool thread for a given size).
  // Not re-entrant: one ParallelFor at a time per pool.
  void ParallelFor(int tasks, const std::function<void(int)>& task);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Cores this process may run on (its affinity mask), divided by the ranks sharing the
// node, at least 1.
int DefaultThreadCount(int local_ranks);

// The instruction set the GEMM micro-kernel uses on this machine: "avx2+fma" or "portable".
const char* GemmIsa();

enum class Transpose : uint8_t { kNo, kYes };

// C[m×n] = alpha · op(A) · op(B) + beta · C, where op(A) is m×k and op(B) is k×n.
// lda/ldb/ldc are the row strides of A, B and C as stored. beta == 0 ignores C's contents
// (NaNs in C do not propagate).
void Gemm(ThreadPool& pool, Transpose transpose_a, Transpose transpose_b, int m, int n, int k,
          float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c,
          int ldc);

// The three GEMMs of a linear layer y = x · wᵀ (weights stored [out × in], as PyTorch does).
void LinearForward(ThreadPool& pool, int batch, int in, int out, const float* x, const float* w,
                   float* y);
// dx[batch × in] = dy · w
void LinearBackwardData(ThreadPool& pool, int batch, int in, int out, const float* dy,
                        const float* w, float* dx);
// dw[out × in] = dyᵀ · x, added to dw when accumulate (gradient accumulation).
void LinearBackwardWeight(ThreadPool& pool, int batch, int in, int out, const float* dy,
                          const float* x, float* dw, bool accumulate);

enum class Activation : uint8_t { kNone, kRelu, kGelu };  // GELU: the exact erf form

// pre[r][c] += bias[c]; out[r][c] = act(pre[r][c]). `pre` keeps the pre-activation for the
// backward pass; out may equal pre only when act is kNone.
void BiasActivationForward(ThreadPool& pool, Activation act, int rows, int cols,
                           const float* bias, float* pre, float* out);
// dpre = dout ⊙ act'(pre); dbias[c] = Σ_r dpre[r][c] (added to dbias when accumulate).
// dpre may equal dout.
void BiasActivationBackward(ThreadPool& pool, Activation act, int rows, int cols,
                            const float* pre, const float* dout, float* dpre, float* dbias,
                            bool accumulate);

// probs = softmax(logits) per row (numerically stable); returns the mean over rows of
// −log probs[label]. *correct (if not null) receives how many rows have argmax == label.
// Labels must be in [0, classes).
double SoftmaxCrossEntropyForward(ThreadPool& pool, int rows, int classes, const float* logits,
                                  const int32_t* labels, float* probs, int* correct);
// dlogits = (probs − onehot(label)) · scale; scale is 1/rows for the mean loss (times any
// further loss scaling such as 1/accumulation steps).
void SoftmaxCrossEntropyBackward(ThreadPool& pool, int rows, int classes, const float* probs,
                                 const int32_t* labels, float scale, float* dlogits);

// torch.optim.SGD semantics: g += wd·p; buf = momentum·buf + g (buf = g on the first step);
// p −= lr·buf (p −= lr·g without momentum).
struct SgdOptions {
  float lr = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
};
void SgdStep(ThreadPool& pool, size_t n, float* params, const float* grads,
             float* momentum_buffer, const SgdOptions& options, bool first_step);

// torch.optim.AdamW semantics: p −= lr·wd·p; m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
// p −= lr · (m / (1−β1^t)) / (sqrt(v / (1−β2^t)) + eps). `step` is t, counted from 1.
struct AdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};
void AdamWStep(ThreadPool& pool, size_t n, float* params, const float* grads, float* exp_avg,
               float* exp_avg_sq, const AdamWOptions& options, int64_t step);

// Gradient buckets: copy tensors into one contiguous buffer and back, and scale it.
struct ConstSpan {
  const float* data = nullptr;
  size_t size = 0;
};
struct MutableSpan {
  float* data = nullptr;
  size_t size = 0;
};
void Flatten(std::span<const ConstSpan> parts, float* flat);
void Unflatten(const float* flat, std::span<const MutableSpan> parts);
void Scale(ThreadPool& pool, size_t n, float factor, float* data);
// sum[i] += add[i] for i < n (FSDP adds a micro-step's gradient shard to the shard).
void Accumulate(ThreadPool& pool, size_t n, const float* add, float* sum);
// Σ data[i]², accumulated in double in a fixed order (for gradient-norm clipping).
double SquaredNorm(ThreadPool& pool, size_t n, const float* data);

}  // namespace rankscope::kernels
