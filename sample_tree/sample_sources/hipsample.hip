// libhipsample: one kernel plus two exported C functions, compiled for several targets.
#include <hip/hip_runtime.h>

#include "hipsample.h"

__global__ void hipsample_fill_kernel(int* out, int n, int value) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = value;
    }
}

extern "C" int hipsample_version(void) { return HIPSAMPLE_VERSION; }

extern "C" int hipsample_fill(int* out, int n, int value) {
    const int block = 64;
    hipLaunchKernelGGL(hipsample_fill_kernel, dim3((n + block - 1) / block), dim3(block), 0, 0,
                       out, n, value);
    return static_cast<int>(hipGetLastError());
}
