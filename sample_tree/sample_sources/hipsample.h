/* Public C API of libhipsample, the small HIP fat library of the sample artifact tree. */
#ifndef HIPSAMPLE_HIPSAMPLE_H
#define HIPSAMPLE_HIPSAMPLE_H

#ifdef __cplusplus
extern "C" {
#endif

#define HIPSAMPLE_VERSION 10000

/* Returns HIPSAMPLE_VERSION; needs no GPU. */
int hipsample_version(void);

/* Sets out[0..n) to value on the current device; returns a hipError_t code. */
int hipsample_fill(int* out, int n, int value);

#ifdef __cplusplus
}
#endif

#endif /* HIPSAMPLE_HIPSAMPLE_H */
