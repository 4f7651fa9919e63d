#include "agg/auth.h"
#include "agg/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

_Static_assert(sizeof(agg_auth_challenge_t) == 40, "agg_auth_challenge_t is wire format");
_Static_assert(sizeof(agg_auth_response_t) == 72, "agg_auth_response_t is wire format");
_Static_assert(sizeof(agg_auth_verdict_t) == 40, "agg_auth_verdict_t is wire format");

/* ---- SHA-256 and HMAC: OpenSSL's libcrypto --------------------------- */

void agg_sha256(const void *data, size_t len, uint8_t out[32])
{
    SHA256(data, len, out);
}

void agg_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
                     uint8_t out[32])
{
    static const uint8_t none;
    unsigned int outlen = 32;

    /* HMAC() takes no NULL key; an empty one is a key of zero bytes all the same */
    HMAC(EVP_sha256(), klen > 0 ? key : &none, (int)klen, data, len, out, &outlen);
}

/* ---- the secret ------------------------------------------------------ */

static agg_status_t agg__auth_read_file(const char *path, agg_auth_t *a, char *why,
                                        size_t whylen)
{
    /* room for the longest secret, "\r\n", and one byte to see it is longer */
    uint8_t buf[AGG_AUTH_KEY_MAX + 3];
    agg_status_t st = AGG_ERR_INVALID_PARAM;
    struct stat sb;
    size_t len = 0;
    ssize_t n;
    int fd;

    /* O_NONBLOCK: a FIFO must not hang the open; fstat() checks what was opened */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        agg_errf(why, whylen, "%s: cannot open the key file: %s", path, strerror(errno));
        return AGG_ERR_INVALID_PARAM;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        agg_errf(why, whylen, "%s: the key file is not a regular file", path);
        goto out;
    }
    if ((sb.st_mode & 077) != 0) {
        agg_errf(why, whylen,
                 "%s: the key file has mode %04o; it must not be accessible to group or "
                 "others (chmod 600 %s)", path, (unsigned)(sb.st_mode & 07777), path);
        goto out;
    }
    while (len < sizeof(buf)) {
        n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            agg_errf(why, whylen, "%s: cannot read the key file: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    if (len > 0 && buf[len - 1] == '\n') {
        len -= (len > 1 && buf[len - 2] == '\r') ? 2 : 1;
    }
    if (len == 0) {
        agg_errf(why, whylen, "%s: the key file holds an empty secret", path);
    } else if (len > AGG_AUTH_KEY_MAX) {
        agg_errf(why, whylen, "%s: the secret is longer than %d bytes", path,
                 AGG_AUTH_KEY_MAX);
    } else {
        memcpy(a->key, buf, len);
        a->len = len;
        st     = AGG_OK;
    }
out:
    explicit_bzero(buf, sizeof(buf));
    close(fd);
    return st;
}

agg_status_t agg_auth_load(agg_auth_t *a, const char *key_file, char *why, size_t whylen)
{
    const char *env = getenv(AGG_AUTH_ENV);
    agg_status_t st = AGG_OK;
    agg_auth_t tmp;

    memset(&tmp, 0, sizeof(tmp));
    if (env != NULL && env[0] != '\0') {
        tmp.len = strlen(env);
        if (tmp.len > AGG_AUTH_KEY_MAX) {
            agg_errf(why, whylen, "%s: the secret is %zu bytes, longer than %d",
                     AGG_AUTH_ENV, tmp.len, AGG_AUTH_KEY_MAX);
            return AGG_ERR_INVALID_PARAM;
        }
        memcpy(tmp.key, env, tmp.len);
        tmp.set = 1;
    } else if (key_file != NULL && key_file[0] != '\0') {
        st      = agg__auth_read_file(key_file, &tmp, why, whylen);
        tmp.set = 1;
    }
    if (st == AGG_OK) {
        *a = tmp;
    }
    explicit_bzero(&tmp, sizeof(tmp));
    return st;
}

/* ---- loopback -------------------------------------------------------- */

static int agg__auth_in4_loopback(const struct in_addr *a)
{
    return (ntohl(a->s_addr) >> 24) == 127;
}

static int agg__auth_in6_loopback(const struct in6_addr *a)
{
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

int agg_auth_addr_is_loopback(const struct sockaddr *sa)
{
    struct sockaddr_in6 s6;
    struct sockaddr_in s4;
    sa_family_t family;

    /* copies, not casts: the caller's object may be any sockaddr type */
    if (sa == NULL) {
        return 0;
    }
    memcpy(&family, &sa->sa_family, sizeof(family));
    if (family == AF_INET) {
        memcpy(&s4, sa, sizeof(s4));
        return agg__auth_in4_loopback(&s4.sin_addr);
    }
    if (family == AF_INET6) {
        memcpy(&s6, sa, sizeof(s6));
        return agg__auth_in6_loopback(&s6.sin6_addr);
    }
    return 0;
}

int agg_auth_host_is_loopback(const char *host)
{
    struct in6_addr a6;
    struct in_addr a4;

    if (host == NULL) {
        return 0;
    }
    if (inet_pton(AF_INET, host, &a4) == 1) {
        return agg__auth_in4_loopback(&a4);
    }
    return inet_pton(AF_INET6, host, &a6) == 1 && agg__auth_in6_loopback(&a6);
}

/* ---- the exchange ---------------------------------------------------- */

/* One side's connection: the socket, the exchange's deadline, where errors go. */
typedef struct agg__auth_io {
    int     fd;
    int64_t deadline;
    char   *why;
    size_t  whylen;
} agg__auth_io_t;

/* Sends (out) or receives one message of the exchange before the deadline. */
static agg_status_t agg__auth_xfer(agg__auth_io_t *io, int out, void *msg, size_t len,
                                   const char *what)
{
    int64_t left = io->deadline - agg_time_ms();
    agg_status_t st;

    left = left < 0 ? 0 : left;
    st   = out ? agg_sock_send_all(io->fd, msg, len, (int)left)
               : agg_sock_recv_all(io->fd, msg, len, (int)left);
    if (st == AGG_ERR_TIMEOUT) {
        agg_errf(io->why, io->whylen, "authentication timed out %s the %s",
                 out ? "sending" : "awaiting", what);
    } else if (st != AGG_OK) {
        agg_errf(io->why, io->whylen, "connection lost %s the %s during authentication",
                 out ? "sending" : "awaiting", what);
    }
    return st;
}

static agg_status_t agg__auth_nonce(agg__auth_io_t *io, uint8_t nonce[AGG_AUTH_NONCE_LEN])
{
    ssize_t n;

    /* 32 bytes come whole once the pool is ready; only the wait for it is interruptible */
    do {
        n = getrandom(nonce, AGG_AUTH_NONCE_LEN, 0);
    } while (n < 0 && errno == EINTR);
    if (n != AGG_AUTH_NONCE_LEN) {
        agg_errf(io->why, io->whylen, "getrandom() failed: %s", strerror(errno));
        return AGG_ERR_IO;
    }
    return AGG_OK;
}

/* HMAC(key, label || first || second); label is "client" or "server". */
static void agg__auth_proof(const agg_auth_t *a, const char *label, const uint8_t *first,
                            const uint8_t *second, uint8_t out[AGG_AUTH_MAC_LEN])
{
    uint8_t msg[6 + 2 * AGG_AUTH_NONCE_LEN];

    memcpy(msg, label, 6);
    memcpy(msg + 6, first, AGG_AUTH_NONCE_LEN);
    memcpy(msg + 6 + AGG_AUTH_NONCE_LEN, second, AGG_AUTH_NONCE_LEN);
    agg_hmac_sha256(a->key, a->len, msg, sizeof(msg), out);
}

/* Compares in time independent of where the first difference is. */
static int agg__auth_equal(const uint8_t *x, const uint8_t *y, size_t len)
{
    uint8_t diff = 0;
    size_t i;

    for (i = 0; i < len; i++) {
        diff |= x[i] ^ y[i];
    }
    return diff == 0;
}

static agg_status_t agg__auth_check_hdr(agg__auth_io_t *io, const uint8_t magic[4],
                                        uint8_t version, const char *peer)
{
    if (memcmp(magic, AGG_AUTH_MAGIC, 4) != 0) {
        agg_errf(io->why, io->whylen, "the %s does not speak the authentication exchange",
                 peer);
        return AGG_ERR_PROTOCOL;
    }
    if (version != AGG_AUTH_VERSION) {
        agg_errf(io->why, io->whylen, "the %s speaks authentication version %u, this side %u",
                 peer, version, AGG_AUTH_VERSION);
        return AGG_ERR_VERSION;
    }
    return AGG_OK;
}

static agg_status_t agg__auth_check_key(agg__auth_io_t *io, const agg_auth_t *a)
{
    if (a == NULL || !a->set || a->len == 0 || a->len > AGG_AUTH_KEY_MAX) {
        agg_errf(io->why, io->whylen, "no shared secret loaded (set %s or a key file)",
                 AGG_AUTH_ENV);
        return AGG_ERR_INVALID_PARAM;
    }
    return AGG_OK;
}

agg_status_t agg_auth_server_challenge(int fd, const agg_auth_t *a, int timeout_ms,
                                       uint8_t nonce[AGG_AUTH_NONCE_LEN], char *why,
                                       size_t whylen)
{
    agg__auth_io_t io = {fd, agg_time_ms() + timeout_ms, why, whylen};
    agg_auth_challenge_t ch = {.version = AGG_AUTH_VERSION};
    agg_status_t st;

    memcpy(ch.magic, AGG_AUTH_MAGIC, 4);
    if ((st = agg__auth_check_key(&io, a)) != AGG_OK ||
        (st = agg__auth_nonce(&io, ch.nonce)) != AGG_OK) {
        return st;
    }
    memcpy(nonce, ch.nonce, AGG_AUTH_NONCE_LEN);
    return agg__auth_xfer(&io, 1, &ch, sizeof(ch), "challenge");
}

agg_status_t agg_auth_server_verdict(int fd, const agg_auth_t *a, int timeout_ms,
                                     const uint8_t nonce[AGG_AUTH_NONCE_LEN],
                                     const agg_auth_response_t *rsp, char *why, size_t whylen)
{
    agg__auth_io_t io = {fd, agg_time_ms() + timeout_ms, why, whylen};
    agg_auth_verdict_t vd = {.status = AGG_AUTH_REFUSE};
    uint8_t want[AGG_AUTH_MAC_LEN];
    agg_status_t st;
    int ok;

    if ((st = agg__auth_check_hdr(&io, rsp->magic, rsp->version, "client")) != AGG_OK) {
        return st;
    }
    agg__auth_proof(a, "client", nonce, rsp->nonce, want);
    ok = agg__auth_equal(want, rsp->proof, sizeof(want));
    if (ok) {
        vd.status = AGG_AUTH_ACCEPT;
        agg__auth_proof(a, "server", rsp->nonce, nonce, vd.proof);
    }
    /* a refused client is told so, rather than left to time out */
    st = agg__auth_xfer(&io, 1, &vd, sizeof(vd), "verdict");
    if (!ok) {
        agg_errf(why, whylen, "the client's proof does not match: wrong shared secret");
        return AGG_ERR_AUTH;
    }
    return st;
}

agg_status_t agg_auth_server(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                             size_t whylen)
{
    agg__auth_io_t io = {fd, agg_time_ms() + timeout_ms, why, whylen};
    uint8_t nonce[AGG_AUTH_NONCE_LEN];
    agg_auth_response_t rsp;
    agg_status_t st = agg_auth_server_challenge(fd, a, timeout_ms, nonce, why, whylen);
    int64_t left;

    if (st == AGG_OK) {
        st = agg__auth_xfer(&io, 0, &rsp, sizeof(rsp), "client's proof");
    }
    left = io.deadline - agg_time_ms();
    return st != AGG_OK ? st : agg_auth_server_verdict(fd, a, left > 0 ? (int)left : 0, nonce,
                                                       &rsp, why, whylen);
}

agg_status_t agg_auth_client(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                             size_t whylen)
{
    agg__auth_io_t io = {fd, agg_time_ms() + timeout_ms, why, whylen};
    agg_auth_response_t rsp = {.version = AGG_AUTH_VERSION};
    uint8_t want[AGG_AUTH_MAC_LEN];
    agg_auth_challenge_t ch;
    agg_auth_verdict_t vd;
    agg_status_t st;

    if ((st = agg__auth_check_key(&io, a)) != AGG_OK ||
        (st = agg__auth_xfer(&io, 0, &ch, sizeof(ch), "server's challenge")) != AGG_OK ||
        (st = agg__auth_check_hdr(&io, ch.magic, ch.version, "server")) != AGG_OK ||
        (st = agg__auth_nonce(&io, rsp.nonce)) != AGG_OK) {
        return st;
    }
    memcpy(rsp.magic, AGG_AUTH_MAGIC, 4);
    agg__auth_proof(a, "client", ch.nonce, rsp.nonce, rsp.proof);
    if ((st = agg__auth_xfer(&io, 1, &rsp, sizeof(rsp), "proof")) != AGG_OK ||
        (st = agg__auth_xfer(&io, 0, &vd, sizeof(vd), "server's verdict")) != AGG_OK) {
        return st;
    }
    if (vd.status != AGG_AUTH_ACCEPT) {
        agg_errf(why, whylen, "the server refused this side's proof: wrong shared secret");
        return AGG_ERR_AUTH;
    }
    agg__auth_proof(a, "server", rsp.nonce, ch.nonce, want);
    if (!agg__auth_equal(want, vd.proof, sizeof(want))) {
        agg_errf(why, whylen, "the server's proof does not match: wrong shared secret");
        return AGG_ERR_AUTH;
    }
    return AGG_OK;
}
