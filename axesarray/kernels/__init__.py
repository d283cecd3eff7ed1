"""Code generation: kernel IR, loop nests, scalar code, CPU and CUDA templates, the math
library, the kernel cache and the repack kernels. Imports ``expr``, ``strided`` and below."""
