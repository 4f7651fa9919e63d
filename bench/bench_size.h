/* The benchmarks' size arguments, as nccl-tests reads them. */
#ifndef BENCH_SIZE_H
#define BENCH_SIZE_H

#include <stddef.h>
#include <stdlib.h>

/* "64", "8K", "16M", "1G" (powers of 1024) into *out; -1 when it is not one. */
static inline int bench_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);

    if (end == s || *s == '-') {
        return -1;
    }
    switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
    }
    if (*end != '\0') {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

#endif
