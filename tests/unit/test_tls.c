/*
 * TLS 1.3 on control connections (agg/tls.h), over real socketpairs with a
 * thread as the other end: the handshake with the same secret and with
 * another one (both ends fail, saying so), a peer that speaks plain, one
 * that never answers; messages both ways through agg_msg_send/recv and the
 * transmit queue, several in one record (what poll cannot see is counted
 * pending), a body of many records; a record altered on the way and a
 * message slipped in beside the session (both refused, never delivered);
 * and a descriptor number reused after close carries no old session.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/auth.h"
#include "agg/sock.h"
#include "agg/status.h"
#include "agg/tls.h"
#include "agg/txq.h"
#include "agg/wire.h"

#define TMO 5000

typedef struct peer {
    int          fd;
    agg_auth_t   key;
    agg_status_t st;
    char         why[256];
    pthread_t    thread;
} peer_t;

static agg_auth_t key_of(const char *s)
{
    agg_auth_t a = {.len = strlen(s), .set = 1};

    memcpy(a.key, s, a.len);
    return a;
}

static void *server_side(void *arg)
{
    peer_t *p = arg;

    p->st = agg_tls_server(p->fd, &p->key, TMO, p->why, sizeof(p->why));
    return NULL;
}

/* A connected pair: fds[0] the client's, fds[1] the server's, handshaken. */
static void pair_with(int fds[2], const char *client_key, const char *server_key,
                      agg_status_t *cst, char *cwhy, peer_t *srv)
{
    agg_auth_t ck = key_of(client_key);

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    srv->fd  = fds[1];
    srv->key = key_of(server_key);
    assert_int_equal(pthread_create(&srv->thread, NULL, server_side, srv), 0);
    *cst = agg_tls_client(fds[0], &ck, TMO, cwhy, 256);
    pthread_join(srv->thread, NULL);
}

static void pair(int fds[2])
{
    peer_t srv = {0};
    agg_status_t cst;
    char cwhy[256] = "";

    pair_with(fds, "the same secret", "the same secret", &cst, cwhy, &srv);
    assert_int_equal(cst, AGG_OK);
    assert_int_equal(srv.st, AGG_OK);
    assert_true(agg_tls_on(fds[0]));
    assert_true(agg_tls_on(fds[1]));
}

static void test_same_secret(void **state)
{
    agg_msg_hdr_t hdr;
    uint8_t got[16];
    int fds[2];

    (void)state;
    pair(fds);
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_HELLO, 11, "ping", 4, TMO), AGG_OK);
    assert_int_equal(agg_msg_recv(fds[1], &hdr, got, sizeof(got), TMO), AGG_OK);
    assert_int_equal(hdr.type, AGG_MSG_HELLO);
    assert_int_equal(hdr.txid, 11);
    assert_int_equal(hdr.length, 4);
    assert_memory_equal(got, "ping", 4);
    assert_int_equal(agg_msg_send(fds[1], AGG_MSG_HELLO_REPLY, 11, "pong", 4, TMO), AGG_OK);
    assert_int_equal(agg_msg_recv(fds[0], &hdr, got, sizeof(got), TMO), AGG_OK);
    assert_int_equal(hdr.type, AGG_MSG_HELLO_REPLY);
    assert_memory_equal(got, "pong", 4);
    agg_tls_close(fds[0]);
    agg_tls_close(fds[1]);
    assert_false(agg_tls_on(fds[0]));
    assert_false(agg_tls_on(fds[1]));
}

typedef struct reader {
    int          fd;
    uint8_t     *buf;
    size_t       cap;
    agg_msg_hdr_t hdr;
    agg_status_t st;
} reader_t;

static void *read_one(void *arg)
{
    reader_t *r = arg;

    r->st = agg_msg_recv(r->fd, &r->hdr, r->buf, r->cap, TMO);
    return NULL;
}

static void test_many_records(void **state)
{
    static uint8_t big[1u << 20], got[1u << 20];
    reader_t r = {.buf = got, .cap = sizeof(got)};
    pthread_t t;
    int fds[2];
    size_t i;

    (void)state;
    pair(fds);
    for (i = 0; i < sizeof(big); ++i) {
        big[i] = (uint8_t)(i * 7 + 3);
    }
    r.fd = fds[1];
    assert_int_equal(pthread_create(&t, NULL, read_one, &r), 0);
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_STATE_REPLY, 5, big, sizeof(big), TMO),
                     AGG_OK);
    pthread_join(t, NULL);
    assert_int_equal(r.st, AGG_OK);
    assert_int_equal(r.hdr.length, sizeof(big));
    assert_memory_equal(got, big, sizeof(big));
    agg_tls_close(fds[0]);
    agg_tls_close(fds[1]);
}

static void test_wrong_secret(void **state)
{
    peer_t srv = {0};
    agg_status_t cst;
    char cwhy[256] = "";
    int fds[2];

    (void)state;
    pair_with(fds, "one secret", "another secret", &cst, cwhy, &srv);
    print_message("client: %s\nserver: %s\n", cwhy, srv.why);
    assert_int_equal(cst, AGG_ERR_AUTH);
    assert_int_equal(srv.st, AGG_ERR_AUTH);
    assert_non_null(strstr(srv.why, "wrong shared secret"));
    assert_non_null(strstr(cwhy, "wrong shared secret"));
    assert_false(agg_tls_on(fds[0]));
    assert_false(agg_tls_on(fds[1]));
    close(fds[0]);
    close(fds[1]);
}

static void test_plain_peer(void **state)
{
    agg_msg_hdr_t hdr;
    int fds[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    /* a client without a secret sends its HELLO in plain */
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_HELLO, 1, NULL, 0, TMO), AGG_OK);
    assert_int_equal(agg_tls_peek_hello(fds[1], TMO), 0);
    /* peeked, not taken: the message is whole for a plain reader */
    assert_int_equal(agg_msg_recv(fds[1], &hdr, NULL, 0, TMO), AGG_OK);
    assert_int_equal(hdr.type, AGG_MSG_HELLO);
    /* nothing at all: no answer within the wait */
    assert_int_equal(agg_tls_peek_hello(fds[1], 50), -1);
    close(fds[0]);
    close(fds[1]);
}

static void test_silent_server(void **state)
{
    agg_auth_t k = key_of("a secret");
    char why[256] = "";
    int fds[2];
    int64_t t0;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    t0 = agg_time_ms();
    assert_int_equal(agg_tls_client(fds[0], &k, 300, why, sizeof(why)), AGG_ERR_TIMEOUT);
    assert_true(agg_time_ms() - t0 >= 250);
    assert_non_null(strstr(why, "timed out"));
    assert_false(agg_tls_on(fds[0]));
    close(fds[0]);
    close(fds[1]);
}

static void test_no_secret(void **state)
{
    agg_auth_t none = {0};
    char why[256] = "";
    int fds[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    assert_int_equal(agg_tls_client(fds[0], &none, 300, why, sizeof(why)),
                     AGG_ERR_INVALID_PARAM);
    assert_non_null(strstr(why, AGG_AUTH_ENV));
    close(fds[0]);
    close(fds[1]);
}

/* Several queued messages leave in one record: the reader takes one, the
 * rest wait decrypted in the session (pending), unseen by poll. */
static void test_txq_pending(void **state)
{
    agg_txq_t q = {0};
    agg_msg_hdr_t hdr, h[3];
    uint8_t got[64];
    int fds[2], i;

    (void)state;
    pair(fds);
    assert_int_equal(agg_txq_init(&q, 8, 1u << 16, 1u << 20, NULL, NULL, 0), AGG_OK);
    for (i = 0; i < 3; ++i) {
        agg_wire_hdr_encode(&h[i], AGG_MSG_HELLO, 5, (uint32_t)(100 + i));
    }
    /* the transmit queue's path */
    assert_int_equal(agg_txq_send(&q, fds[0], &h[0], sizeof(h[0]), "abcde", 5, AGG_TXQ_COPY),
                     AGG_OK);
    assert_int_equal(agg_msg_recv(fds[1], &hdr, got, sizeof(got), TMO), AGG_OK);
    assert_int_equal(hdr.txid, 100);
    assert_memory_equal(got, "abcde", 5);
    assert_int_equal(agg_tls_pending(fds[1]), 0);
    {
        /* two messages in one sendv: one record */
        uint8_t two[2 * (sizeof(agg_msg_hdr_t) + 5)];
        struct iovec v[4] = {{&h[1], sizeof(h[1])}, {"fghij", 5}, {&h[2], sizeof(h[2])},
                             {"klmno", 5}};

        assert_int_equal(agg_tls_sendv(fds[0], v, 4), (ssize_t)sizeof(two));
    }
    assert_int_equal(agg_msg_recv(fds[1], &hdr, got, sizeof(got), TMO), AGG_OK);
    assert_int_equal(hdr.txid, 101);
    assert_int_equal(agg_tls_pending(fds[1]), (int)(sizeof(agg_msg_hdr_t) + 5));
    assert_int_equal(agg_msg_recv(fds[1], &hdr, got, sizeof(got), TMO), AGG_OK);
    assert_int_equal(hdr.txid, 102);
    assert_memory_equal(got, "klmno", 5);
    assert_int_equal(agg_tls_pending(fds[1]), 0);
    agg_txq_free(&q);
    agg_tls_close(fds[0]);
    agg_tls_close(fds[1]);
}

/* A relay that alters a record, or slips its own plain message in beside the
 * session: the receiver refuses it (EPROTO) and delivers nothing of it. */
static void test_tampered(void **state)
{
    uint8_t rec[512], got[64];
    agg_msg_hdr_t hdr;
    ssize_t n;
    int fds[2];

    (void)state;
    pair(fds);
    /* the client's record, caught on the way and one byte flipped */
    assert_int_equal(agg_msg_send(fds[0], AGG_MSG_JOB_CREATE, 7, "job key 1234", 12, TMO),
                     AGG_OK);
    n = recv(fds[1], rec, sizeof(rec), MSG_DONTWAIT);
    assert_true(n > 5 + 12);
    assert_null(memmem(rec, (size_t)n, "job key", 7)); /* not in clear on the wire */
    rec[n - 3] ^= 0x40;
    /* back on the way to the server, from the client's raw descriptor */
    assert_int_equal(write(fds[0], rec, (size_t)n), n);
    errno = 0;
    assert_int_not_equal(agg_msg_recv(fds[1], &hdr, got, sizeof(got), TMO), AGG_OK);
    agg_tls_close(fds[0]);
    agg_tls_close(fds[1]);

    /* a plain message slipped in beside a session */
    pair(fds);
    agg_wire_hdr_encode(&hdr, AGG_MSG_GROUP_CREATE, 0, 9);
    assert_int_equal(write(fds[0], &hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
    errno = 0;
    n = agg_sock_recv_some(fds[1], got, sizeof(got));
    assert_int_equal(n, -1);
    assert_int_equal(errno, EPROTO);
    agg_tls_close(fds[0]);
    agg_tls_close(fds[1]);
}

/* close() without agg_tls_close leaves a session under the number; the next
 * socket that gets it is plain (agg_sock_connect and accept forget it). */
static void test_reused_number(void **state)
{
    int fds[2], again[2];

    (void)state;
    pair(fds);
    close(fds[1]);
    assert_true(agg_tls_on(fds[1]));
    agg_tls_forget(fds[1]);
    assert_false(agg_tls_on(fds[1]));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, again), 0);
    assert_false(agg_tls_on(again[0]));
    assert_false(agg_tls_on(again[1]));
    close(again[0]);
    close(again[1]);
    agg_tls_close(fds[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_secret),  cmocka_unit_test(test_many_records),
        cmocka_unit_test(test_wrong_secret), cmocka_unit_test(test_plain_peer),
        cmocka_unit_test(test_silent_server), cmocka_unit_test(test_no_secret),
        cmocka_unit_test(test_txq_pending),  cmocka_unit_test(test_tampered),
        cmocka_unit_test(test_reused_number),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
