// hip-sample-info: a small fat executable that reports the visible HIP devices.
// On a machine without a GPU it reports the runtime's error and still exits 0.
#include <hip/hip_runtime.h>

#include <cstdio>
#include <cstring>

__global__ void hip_sample_info_kernel(int* out) { out[threadIdx.x] = static_cast<int>(threadIdx.x); }

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
        std::printf("hip-sample-info\n");
        return 0;
    }
    int devices = 0;
    hipError_t status = hipGetDeviceCount(&devices);
    if (status != hipSuccess) {
        std::printf("hip-sample-info: no usable device (%s)\n", hipGetErrorName(status));
        return 0;
    }
    std::printf("hip-sample-info: %d device(s)\n", devices);
    int* buffer = nullptr;
    if (devices > 0 && hipMalloc(&buffer, 64 * sizeof(int)) == hipSuccess) {
        hipLaunchKernelGGL(hip_sample_info_kernel, dim3(1), dim3(64), 0, 0, buffer);
        std::printf("hip-sample-info: kernel launch %s\n", hipGetErrorName(hipDeviceSynchronize()));
        (void)hipFree(buffer);
    }
    return 0;
}
