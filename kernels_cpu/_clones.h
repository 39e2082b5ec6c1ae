/* FD_CLONES: the x86-64 function clones the kernels_cpu hot loops are compiled into -- the
   baseline (SSE2, what a manylinux wheel may assume), x86-64-v3 (AVX2) and x86-64-v4 (AVX-512),
   picked once per process by glibc's ifunc resolver from the CPU it runs on. Each clone
   computes the same IEEE operations in the same order (no -ffast-math; fp-contract off, so no
   FMA even where the ISA has it): the results are bit-identical, only the vector width differs.
   GCC >= 11 on x86-64 Linux only (clang's target_clones and the other platforms: one baseline
   build; AddressSanitizer builds: one copy, so reports name one function). */
#ifndef KERNELS_CPU_CLONES_H
#define KERNELS_CPU_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && defined(__x86_64__) \
    && defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#define FD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FD_CLONES
#endif

#endif
