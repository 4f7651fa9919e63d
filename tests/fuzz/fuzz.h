/* What every libFuzzer harness here shares. */
#ifndef AGG_FUZZ_H
#define AGG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* An invariant the code under test broke: abort so libFuzzer keeps the input. */
#define FUZZ_CHECK(_cond)                                                           \
    do {                                                                            \
        if (!(_cond)) {                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__,    \
                    #_cond);                                                        \
            abort();                                                                \
        }                                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
