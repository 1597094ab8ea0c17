// Compiled with the project's CUDA settings so CI proves nvcc builds our flags, and so
// check_cuda_arch.cmake can verify the target architectures. No kernel here is launched.
__global__ void rankscope_cuda_smoke_scale(float* values, float factor, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) values[i] *= factor;
}
