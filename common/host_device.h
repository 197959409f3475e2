#pragma once
// TP_HD marks functions compiled for both the CPU and the GPU, so the digest-deciding arithmetic
// (RNG, gradient shaping) has a single source.
#ifdef __CUDACC__
#define TP_HD __host__ __device__
#else
#define TP_HD
#endif
