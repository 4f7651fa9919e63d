/*
 * Shared-secret authentication of a TCP connection, before its first
 * message: both ends prove they hold the same secret without sending it.
 *
 * The exchange (wire version 1; every field is a byte array, so there is no
 * byte order to agree on and no padding; tests/unit/test_auth.c pins it):
 *
 *   1. server -> client, agg_auth_challenge_t, 40 bytes
 *        0   4  magic     "AGAU"
 *        4   1  version   AGG_AUTH_VERSION
 *        5   3  reserved  zero, ignored
 *        8  32  nonce     Ns, from getrandom()
 *   2. client -> server, agg_auth_response_t, 72 bytes
 *        0   4  magic     "AGAU"
 *        4   1  version   AGG_AUTH_VERSION
 *        5   3  reserved  zero, ignored
 *        8  32  nonce     Nc, from getrandom()
 *       40  32  proof     HMAC-SHA256(key, "client" || Ns || Nc)
 *   3. server -> client, agg_auth_verdict_t, 40 bytes
 *        0   1  status    AGG_AUTH_ACCEPT, or AGG_AUTH_REFUSE when the
 *                         client's proof is wrong
 *        1   7  reserved  zero, ignored
 *        8  32  proof     HMAC-SHA256(key, "server" || Nc || Ns) when
 *                         accepted, zero when refused
 *
 * "client" and "server" are those 6 ASCII bytes, no NUL; the key is the raw
 * secret. The labels keep one side's proof from being replayed as the
 * other's, and each side's fresh nonce keeps an old proof from being
 * replayed at all. This authenticates the peer when the connection opens
 * and nothing more: what follows is neither encrypted nor protected, so it
 * does not stop someone who can relay or alter the traffic.
 */
#ifndef AGG_AUTH_H
#define AGG_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "agg/status.h"

#define AGG_AUTH_KEY_MAX   256
#define AGG_AUTH_ENV       "AGG_AM_SECRET"
#define AGG_AUTH_MAGIC     "AGAU"
#define AGG_AUTH_VERSION   1
#define AGG_AUTH_NONCE_LEN 32
#define AGG_AUTH_MAC_LEN   32
#define AGG_AUTH_ACCEPT    0
#define AGG_AUTH_REFUSE    1

typedef struct agg_auth_challenge {
    uint8_t magic[4];
    uint8_t version;
    uint8_t reserved[3];
    uint8_t nonce[AGG_AUTH_NONCE_LEN];
} agg_auth_challenge_t;

typedef struct agg_auth_response {
    uint8_t magic[4];
    uint8_t version;
    uint8_t reserved[3];
    uint8_t nonce[AGG_AUTH_NONCE_LEN];
    uint8_t proof[AGG_AUTH_MAC_LEN];
} agg_auth_response_t;

typedef struct agg_auth_verdict {
    uint8_t status;
    uint8_t reserved[7];
    uint8_t proof[AGG_AUTH_MAC_LEN];
} agg_auth_verdict_t;

/* The shared secret; set is 0 when none was configured. */
typedef struct agg_auth {
    uint8_t key[AGG_AUTH_KEY_MAX];
    size_t  len;
    int     set;
} agg_auth_t;

/* SHA-256 (FIPS 180-4) of len bytes (OpenSSL's libcrypto). */
void agg_sha256(const void *data, size_t len, uint8_t out[32]);

/* HMAC-SHA256 (RFC 2104, OpenSSL's libcrypto); keys past 64 bytes are hashed first. */
void agg_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
                     uint8_t out[32]);

/*
 * Loads the shared secret: the environment variable AGG_AM_SECRET when it is
 * set and non-empty, else the file `key_file` (NULL or "": none). The file
 * must be a regular file with no permission bits for group or others (mode &
 * 077 == 0); its content, less one trailing newline ("\n" or "\r\n"), is the
 * secret. Returns AGG_OK with a->set = 1; AGG_OK with a->set = 0 when
 * neither is given; AGG_ERR_INVALID_PARAM, `a` untouched, when the file
 * cannot be used or the secret is empty or longer than AGG_AUTH_KEY_MAX
 * bytes, with `why` naming the file or the variable and what is wrong.
 */
agg_status_t agg_auth_load(agg_auth_t *a, const char *key_file, char *why, size_t whylen);

/*
 * Whether an address is loopback: IPv4 127.0.0.0/8, IPv6 ::1, or an
 * IPv4-mapped ::ffff:127.x.y.z. Other families (and NULL) are not, so the
 * caller asks for authentication.
 */
int agg_auth_addr_is_loopback(const struct sockaddr *sa);

/* The same for a numeric IPv4 or IPv6 address; a host name is not loopback. */
int agg_auth_host_is_loopback(const char *host);

/*
 * Runs one side of the exchange above on a connected socket, blocking or
 * not; all of it must finish within timeout_ms. Returns AGG_OK when the peer
 * holds the same secret, else with `why` saying what happened:
 *   AGG_ERR_AUTH           the peer's proof is wrong, or the server refused
 *                          ours ("wrong shared secret")
 *   AGG_ERR_TIMEOUT        the peer did not answer in time
 *   AGG_ERR_IO             the peer closed the connection, or a socket error
 *   AGG_ERR_PROTOCOL       the peer does not speak this exchange (bad magic)
 *   AGG_ERR_VERSION        the peer speaks another version of it
 *   AGG_ERR_INVALID_PARAM  `a` holds no secret
 * On an error the caller closes the connection.
 */
agg_status_t agg_auth_server(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                             size_t whylen);
agg_status_t agg_auth_client(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                             size_t whylen);

/*
 * The server's side in two steps, for an event loop that reads the
 * client's proof without a thread: the challenge (nonce kept by the
 * caller), then, once the proof (an agg_auth_response_t) is read, its
 * check and the verdict. agg_auth_server is the two with the read between;
 * errors as above.
 */
agg_status_t agg_auth_server_challenge(int fd, const agg_auth_t *a, int timeout_ms,
                                       uint8_t nonce[AGG_AUTH_NONCE_LEN], char *why,
                                       size_t whylen);
agg_status_t agg_auth_server_verdict(int fd, const agg_auth_t *a, int timeout_ms,
                                     const uint8_t nonce[AGG_AUTH_NONCE_LEN],
                                     const agg_auth_response_t *rsp, char *why, size_t whylen);

#endif
