"""Layout repacks: plans (canonical batched 2-D transposes), SIMD tiles, and the CPU and
CUDA kernels that run them."""
