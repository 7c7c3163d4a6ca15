// hipsample-test: a host-only test program linked against libhipsample.so.1 and the HIP runtime.
// It has no kernels of its own, so it carries no device code.
#include <hip/hip_runtime_api.h>

#include <cstdio>

#include "hipsample.h"

int main() {
    if (hipsample_version() != HIPSAMPLE_VERSION) {
        std::fprintf(stderr, "hipsample-test: unexpected version %d\n", hipsample_version());
        return 1;
    }
    int devices = 0;
    hipError_t status = hipGetDeviceCount(&devices);
    if (status == hipSuccess && devices > 0) {
        int* buffer = nullptr;
        if (hipMalloc(&buffer, 256 * sizeof(int)) == hipSuccess) {
            int rc = hipsample_fill(buffer, 256, 7);
            (void)hipDeviceSynchronize();
            (void)hipFree(buffer);
            if (rc != 0) {
                std::fprintf(stderr, "hipsample-test: kernel launch failed (%d)\n", rc);
                return 1;
            }
        }
    }
    std::printf("hipsample-test ok\n");
    return 0;
}
