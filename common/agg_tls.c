/*
 * TLS 1.3 with the shared secret as pre-shared key (agg/tls.h says what is
 * agreed). OpenSSL does the protocol; this file keeps one session per
 * descriptor and turns OpenSSL's results into recv/send ones.
 */
#include "agg/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>

#include "agg/log.h"
#include "agg/sock.h"

#define AGG__TLS_PSK_LEN 32
#define AGG__TLS_RECORD  16384 /* what one record carries at most */

/* the session of each descriptor, NULL for a plain one */
static SSL *agg__tls_of[AGG_TLS_MAX_FD];

static pthread_once_t agg__tls_once = PTHREAD_ONCE_INIT;
static SSL_CTX *agg__tls_ctx[2]; /* [0] client, [1] server */
static BIO_METHOD *agg__tls_bio;  /* a socket through send(MSG_NOSIGNAL) and recv */

static SSL *agg__tls_get(int fd)
{
    return fd >= 0 && fd < AGG_TLS_MAX_FD ? __atomic_load_n(&agg__tls_of[fd], __ATOMIC_ACQUIRE) :
                                            NULL;
}

static void agg__tls_set(int fd, SSL *s)
{
    SSL *old = __atomic_exchange_n(&agg__tls_of[fd], s, __ATOMIC_ACQ_REL);

    if (old != NULL) {
        SSL_free(old);
    }
}

/* During a handshake the session's app data is its 32-byte key. */
static unsigned int agg__tls_client_psk(SSL *s, const char *hint, char *identity,
                                        unsigned int max_identity, unsigned char *psk,
                                        unsigned int max_psk)
{
    const uint8_t *key = SSL_get_app_data(s);

    (void)hint;
    if (key == NULL || max_psk < AGG__TLS_PSK_LEN ||
        max_identity <= strlen(AGG_TLS_PSK_IDENTITY)) {
        return 0;
    }
    strcpy(identity, AGG_TLS_PSK_IDENTITY);
    memcpy(psk, key, AGG__TLS_PSK_LEN);
    return AGG__TLS_PSK_LEN;
}

static unsigned int agg__tls_server_psk(SSL *s, const char *identity, unsigned char *psk,
                                        unsigned int max_psk)
{
    const uint8_t *key = SSL_get_app_data(s);

    if (key == NULL || identity == NULL || strcmp(identity, AGG_TLS_PSK_IDENTITY) != 0 ||
        max_psk < AGG__TLS_PSK_LEN) {
        return 0;
    }
    memcpy(psk, key, AGG__TLS_PSK_LEN);
    return AGG__TLS_PSK_LEN;
}

/*
 * OpenSSL's socket BIO writes with write(), which raises SIGPIPE in a program
 * (an MPI rank) whose peer has gone; this one sends with MSG_NOSIGNAL.
 */
static int agg__tls_bio_write(BIO *b, const char *buf, size_t len, size_t *done)
{
    ssize_t n = send(BIO_get_fd(b, NULL), buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

    BIO_clear_retry_flags(b);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            BIO_set_retry_write(b);
        }
        return 0;
    }
    *done = (size_t)n;
    return 1;
}

static int agg__tls_bio_read(BIO *b, char *buf, size_t len, size_t *done)
{
    ssize_t n = recv(BIO_get_fd(b, NULL), buf, len, MSG_DONTWAIT);

    BIO_clear_retry_flags(b);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            BIO_set_retry_read(b);
        }
        return 0;
    }
    if (n == 0) {
        errno = 0; /* the peer's end */
        return 0;
    }
    *done = (size_t)n;
    return 1;
}

static long agg__tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    switch (cmd) {
    case BIO_C_SET_FD:
        BIO_set_data(b, (void *)(intptr_t)*(int *)ptr);
        BIO_set_init(b, 1);
        (void)num;
        return 1;
    case BIO_C_GET_FD:
        if (ptr != NULL) {
            *(int *)ptr = (int)(intptr_t)BIO_get_data(b);
        }
        return (long)(intptr_t)BIO_get_data(b);
    case BIO_CTRL_FLUSH:
        return 1;
    default:
        return 0;
    }
}

static void agg__tls_init(void)
{
    int server;

    agg__tls_bio = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
                                    BIO_TYPE_DESCRIPTOR, "agg socket");
    if (agg__tls_bio == NULL || BIO_meth_set_write_ex(agg__tls_bio, agg__tls_bio_write) != 1 ||
        BIO_meth_set_read_ex(agg__tls_bio, agg__tls_bio_read) != 1 ||
        BIO_meth_set_ctrl(agg__tls_bio, agg__tls_bio_ctrl) != 1) {
        return;
    }

    for (server = 0; server < 2; ++server) {
        SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

        if (ctx == NULL) {
            continue;
        }
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1 ||
            SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1 ||
            SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") != 1) {
            SSL_CTX_free(ctx);
            continue;
        }
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        if (server) {
            SSL_CTX_set_num_tickets(ctx, 0);
            SSL_CTX_set_psk_server_callback(ctx, agg__tls_server_psk);
        } else {
            SSL_CTX_set_psk_client_callback(ctx, agg__tls_client_psk);
        }
        agg__tls_ctx[server] = ctx;
    }
}

/* What OpenSSL said, in words a user can act on. */
static void agg__tls_why(SSL *s, int rc, int server, char *why, size_t whylen)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    int err = SSL_get_error(s, rc);

    if (e == 0 && (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_ZERO_RETURN)) {
        agg_errf(why, whylen, "the %s closed the connection during the TLS handshake (%s)",
                 server ? "client" : "server",
                 server ? "it may hold another shared secret, or none" :
                          "a different shared secret, or a manager without one");
        return;
    }
    if (reason == NULL) {
        reason = "no reason given";
    }
    /* a key that differs fails the PSK binder (server) or gets its alert (client) */
    if (strstr(reason, "binder") != NULL || strstr(reason, "decrypt error") != NULL ||
        strstr(reason, "illegal parameter") != NULL ||
        strstr(reason, "no suitable") != NULL || strstr(reason, "no shared cipher") != NULL ||
        strstr(reason, "handshake failure") != NULL) {
        agg_errf(why, whylen, "the TLS handshake failed (%s): wrong shared secret", reason);
        return;
    }
    agg_errf(why, whylen, "the TLS handshake failed: %s", reason);
}

static agg_status_t agg__tls_handshake(int fd, const agg_auth_t *a, int timeout_ms, int server,
                                       char *why, size_t whylen)
{
    uint8_t psk[EVP_MAX_MD_SIZE];
    unsigned int psk_len = 0;
    int64_t deadline = agg_time_ms() + timeout_ms;
    int flags, rc;
    BIO *bio;
    SSL *s;

    if (a == NULL || !a->set || a->len == 0) {
        agg_errf(why, whylen, "no shared secret loaded (set %s or a key file)", AGG_AUTH_ENV);
        return AGG_ERR_INVALID_PARAM;
    }
    if (fd < 0 || fd >= AGG_TLS_MAX_FD) {
        agg_errf(why, whylen, "descriptor %d is beyond the %d that can carry TLS", fd,
                 AGG_TLS_MAX_FD);
        return AGG_ERR_NO_RESOURCE;
    }
    pthread_once(&agg__tls_once, agg__tls_init);
    if (agg__tls_ctx[server] == NULL || agg__tls_bio == NULL) {
        agg_errf(why, whylen, "OpenSSL offers no TLS 1.3 with TLS_AES_128_GCM_SHA256 here");
        return AGG_ERR_NOT_SUPPORTED;
    }
    if (HMAC(EVP_sha256(), a->key, (int)a->len, (const uint8_t *)AGG_TLS_PSK_LABEL,
             strlen(AGG_TLS_PSK_LABEL), psk, &psk_len) == NULL || psk_len != AGG__TLS_PSK_LEN) {
        agg_errf(why, whylen, "cannot derive the TLS key from the shared secret");
        return AGG_ERR_NO_MEMORY;
    }
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        OPENSSL_cleanse(psk, sizeof(psk));
        agg_errf(why, whylen, "fcntl: %s", strerror(errno));
        return AGG_ERR_IO;
    }
    agg__tls_set(fd, NULL);
    s   = SSL_new(agg__tls_ctx[server]);
    bio = s != NULL ? BIO_new(agg__tls_bio) : NULL;
    if (bio != NULL) {
        BIO_set_fd(bio, fd, BIO_NOCLOSE);
        SSL_set_bio(s, bio, bio); /* the session owns it now */
    }
    if (s == NULL || bio == NULL) {
        SSL_free(s);
        OPENSSL_cleanse(psk, sizeof(psk));
        agg_errf(why, whylen, "no memory for a TLS session");
        return AGG_ERR_NO_MEMORY;
    }
    SSL_set_app_data(s, psk);
    for (;;) {
        struct pollfd p = {.fd = fd};
        int64_t left;
        int err;

        ERR_clear_error();
        rc = server ? SSL_accept(s) : SSL_connect(s);
        if (rc == 1) {
            break;
        }
        err = SSL_get_error(s, rc);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
            agg__tls_why(s, rc, server, why, whylen);
            break;
        }
        left = deadline - agg_time_ms();
        p.events = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        if (left <= 0 || (poll(&p, 1, (int)left) == 0 && agg_time_ms() >= deadline)) {
            agg_errf(why, whylen, "the TLS handshake timed out after %d ms (the %s said "
                     "nothing)", timeout_ms, server ? "client" : "server");
            rc = -2;
            break;
        }
    }
    SSL_set_app_data(s, NULL);
    OPENSSL_cleanse(psk, sizeof(psk));
    ERR_clear_error();
    if (rc != 1) {
        SSL_free(s);
        return rc == -2 ? AGG_ERR_TIMEOUT : AGG_ERR_AUTH;
    }
    agg__tls_set(fd, s);
    return AGG_OK;
}

agg_status_t agg_tls_client(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                            size_t whylen)
{
    return agg__tls_handshake(fd, a, timeout_ms, 0, why, whylen);
}

agg_status_t agg_tls_server(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                            size_t whylen)
{
    return agg__tls_handshake(fd, a, timeout_ms, 1, why, whylen);
}

int agg_tls_on(int fd)
{
    return agg__tls_get(fd) != NULL;
}

/* errno for an OpenSSL failure of an established session */
static ssize_t agg__tls_fail(SSL *s, int rc)
{
    switch (SSL_get_error(s, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        break;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return 0; /* the peer's close_notify */
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0 && errno == 0) {
            return 0; /* closed without close_notify: an end all the same */
        }
        errno = errno != 0 ? errno : EPIPE;
        break;
    default:
        errno = EPROTO; /* a record that does not verify: altered, forged or out of order */
        break;
    }
    ERR_clear_error();
    return -1;
}

ssize_t agg_tls_recv(int fd, void *buf, size_t len)
{
    SSL *s = agg__tls_get(fd);
    size_t got = 0;
    int rc;

    if (s == NULL) {
        errno = ENOTCONN;
        return -1;
    }
    errno = 0;
    rc    = SSL_read_ex(s, buf, len, &got);
    return rc == 1 ? (ssize_t)got : agg__tls_fail(s, rc);
}

ssize_t agg_tls_sendv(int fd, const struct iovec *iov, int iovcnt)
{
    SSL *s = agg__tls_get(fd);
    uint8_t flat[AGG__TLS_RECORD];
    const void *buf = flat;
    size_t len = 0, sent = 0;
    int i, rc;

    if (s == NULL) {
        errno = ENOTCONN;
        return -1;
    }
    if (iovcnt == 1) {
        buf = iov[0].iov_base;
        len = iov[0].iov_len;
    } else {
        /* one record for what fits: a header and its body leave together */
        for (i = 0; i < iovcnt && len < sizeof(flat); ++i) {
            size_t take = iov[i].iov_len < sizeof(flat) - len ? iov[i].iov_len :
                                                                sizeof(flat) - len;

            memcpy(flat + len, iov[i].iov_base, take);
            len += take;
        }
    }
    if (len == 0) {
        return 0;
    }
    errno = 0;
    rc    = SSL_write_ex(s, buf, len, &sent);
    if (rc == 1) {
        return (ssize_t)sent;
    }
    if (agg__tls_fail(s, rc) == 0) {
        errno = EPIPE;
    }
    return -1;
}

int agg_tls_pending(int fd)
{
    SSL *s = agg__tls_get(fd);

    return s != NULL ? SSL_pending(s) : 0;
}

void agg_tls_close(int fd)
{
    SSL *s;

    if (fd < 0) {
        return;
    }
    s = fd < AGG_TLS_MAX_FD ? __atomic_exchange_n(&agg__tls_of[fd], NULL, __ATOMIC_ACQ_REL) :
                              NULL;
    if (s != NULL) {
        SSL_shutdown(s); /* close_notify if the socket takes it now; never waits */
        ERR_clear_error();
        SSL_free(s);
    }
    close(fd);
}

void agg_tls_forget(int fd)
{
    if (fd >= 0 && fd < AGG_TLS_MAX_FD) {
        agg__tls_set(fd, NULL);
    }
}

int agg_tls_peek_hello(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint8_t b;
    ssize_t n;

    if (poll(&p, 1, timeout_ms) <= 0) {
        return -1;
    }
    do {
        n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
        return -1;
    }
    return b == 0x16; /* a handshake record; a plain message starts with its magic */
}
