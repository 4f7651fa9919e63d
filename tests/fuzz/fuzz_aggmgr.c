/*
 * libFuzzer harness for aggmgr's control port: the input is what one peer
 * sends, byte for byte, on a connection aggmgr serves (a socket pair, as a
 * peer that passed the secret check), whatever it says: HELLO, JOB_CREATE,
 * GROUP_CREATE, a switchsim's SIM_REGISTER, garbage, half a message. aggmgr
 * runs its own event loop over it (no switchsim is registered, unless the
 * input registers itself as one) until the peer has hung up and aggmgr has
 * closed the connection.
 *
 * Besides ASan/UBSan/LSan: aggmgr closes the connection once the peer hung
 * up (it never waits for the rest of a message that cannot come), and what
 * the peer made goes with it: no job, no group, no switchsim left, every
 * host adapter free, no byte of a receive buffer still counted.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "aggmgr.h"
#include "fuzz.h"
#include "agg/log.h"
#include "agg/loop.h"

static aggmgr_t fuzz_am;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *lvl = getenv("AGG_FUZZ_LOG_LEVEL");

    (void)argc;
    (void)argv;
    agg_log_set_level(lvl != NULL ? atoi(lvl) : AGG_LOG_TRACE);
    agg_conf_init(&fuzz_am.conf);
    if (aggmgr_topo_fat_tree(2, 1, 4, &fuzz_am.topo) != AGG_OK) {
        abort();
    }
    fuzz_am.ans       = calloc((size_t)fuzz_am.topo.num_nodes, sizeof(*fuzz_am.ans));
    fuzz_am.ca_busy   = calloc((size_t)fuzz_am.topo.num_cas, 1);
    fuzz_am.listen_fd = -1;
    FUZZ_CHECK(fuzz_am.ans != NULL && fuzz_am.ca_busy != NULL);
    aggmgr_resources_init(&fuzz_am);
    FUZZ_CHECK(aggmgr_server_start(&fuzz_am) == AGG_OK);
    return 0;
}

/* Reads and drops what aggmgr answered, so that its sends never stall. */
static void fuzz_drain(int fd)
{
    char sink[65536];

    while (read(fd, sink, sizeof(sink)) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    aggmgr_t *am = &fuzz_am;
    int sv[2], i, rounds;
    size_t sent = 0;

    if (size > 1u << 16 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return 0;
    }
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    aggmgr_server_adopt(am, sv[0]);
    /* the input in, as fast as aggmgr takes it; then the peer hangs up */
    for (rounds = 0; sent < size && rounds < 10000; ++rounds) {
        ssize_t n = write(sv[1], data + sent, size - sent);

        sent += n > 0 ? (size_t)n : 0;
        agg_loop_once(am->loop, 0);
        fuzz_drain(sv[1]);
    }
    shutdown(sv[1], SHUT_WR);
    for (rounds = 0; am->num_conns > 0 && rounds < 10000; ++rounds) {
        agg_loop_once(am->loop, 1);
        fuzz_drain(sv[1]);
    }
    close(sv[1]);
    /* closed once the peer hung up, and everything it made gone with it */
    FUZZ_CHECK(am->num_conns == 0);
    FUZZ_CHECK(am->jobs == NULL);
    FUZZ_CHECK(am->rx_bytes == 0);
    for (i = 0; i < am->num_sims; ++i) {
        FUZZ_CHECK(am->sims[i].fd < 0);
    }
    for (i = 0; i < am->topo.num_cas; ++i) {
        FUZZ_CHECK(am->ca_busy[i] == 0);
    }
    return 0;
}
