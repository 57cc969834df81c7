#ifndef CLMDB_SHIM_H
#define CLMDB_SHIM_H
#include <lmdb.h>

/* A hint to the CPU to load the cache line at `p` (no fault if `p` is not mapped). */
static inline void clmdb_prefetch(const void *p) { __builtin_prefetch(p, 0, 3); }
#endif
