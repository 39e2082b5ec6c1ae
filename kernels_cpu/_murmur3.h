/* The MurmurHash3 steps of Model Runner V2's random stream (kernels_cpu/_murmur3.pxd declares
   them; vLLM's murmur3_hash32 in vllm/v1/worker/gpu/sample/gumbel.py is the contract): uint32
   arithmetic that wraps as Triton's does. One definition for the scalar draws (the .pxd) and
   for fd_uniforms32_at, the loop that hashes a block's lanes -- 32-bit multiplies, which the
   x86-64 baseline (SSE2) cannot do in vector registers, so that loop is cloned for x86-64-v3
   and -v4 (FD_CLONES), where it runs 8 or 16 lanes at a time. */
#ifndef KERNELS_CPU_MURMUR3_H
#define KERNELS_CPU_MURMUR3_H

#include <stddef.h>
#include <stdint.h>
#include "_clones.h"

static inline uint32_t fd_rotl32(uint32_t value, int shift) {
    return (value << shift) | (value >> (32 - shift));
}

static inline uint32_t fd_murmur3_mix(uint32_t h, uint32_t key) {
    key = key * 0xCC9E2D51u;
    key = fd_rotl32(key, 15);
    key = key * 0x1B873593u;
    h ^= key;
    h = fd_rotl32(h, 13);
    return h * 5u + 0xE6546B64u;
}

static inline uint32_t fd_murmur3_fmix32(uint32_t h) {
    h ^= h >> 16;
    h = h * 0x85EBCA6Bu;
    h ^= h >> 13;
    h = h * 0xC2B2AE35u;
    return h ^ (h >> 16);
}

/* vLLM's murmur3_uniform32 of a hash r: (r + 0.5) * 2**-32, its two 16-bit halves converted
   exactly and rounded once to fp32 -- in (0, 1). */
static inline float fd_murmur3_to_uniform32(uint32_t r) {
    return (float)(int)(r >> 16) * 1.52587890625e-05f
           + ((float)(int)(r & 0xFFFFu) + 0.5f) * 2.3283064365386963e-10f;
}

/* u[q] = murmur3_uniform32 of key key0 + lanes[q], q < n, from `prefix` (the hash state after
   the domain, the seed and the position, the same for every key of a draw): the last mix and
   the finaliser per key. Branch-free, so each clone vectorises it. */
FD_CLONES static void fd_uniforms32_at(uint32_t prefix, uint32_t key0, const int32_t* lanes,
                                       ptrdiff_t n, float* u) {
    for (ptrdiff_t q = 0; q < n; q++) {
        uint32_t r = fd_murmur3_fmix32(fd_murmur3_mix(prefix, key0 + (uint32_t)lanes[q]) ^ 16u);
        u[q] = fd_murmur3_to_uniform32(r);
    }
}

#endif
