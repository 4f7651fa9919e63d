/*
 * TLS 1.3 on control connections (OpenSSL): every message to and from
 * aggmgr travels encrypted and authenticated once both ends hold the shared
 * secret (agg/auth.h), so a relay in the middle can neither read a job's key
 * nor slip in a message of its own.
 *
 * The secret is an external pre-shared key (RFC 8446 4.2.11): identity
 * AGG_TLS_PSK_IDENTITY, key HMAC-SHA256(secret, AGG_TLS_PSK_LABEL), cipher
 * TLS_AES_128_GCM_SHA256, with an ephemeral (EC)DHE exchange beside it
 * (psk_dhe_ke), so traffic recorded today stays secret if the secret leaks
 * later. No certificates, no session tickets. A wrong secret fails the
 * handshake on both sides (the PSK binder does not verify).
 *
 * A session belongs to its socket: the I/O in agg/sock.h, agg/txq.h and the
 * event loop (agg/loop.h) find it by descriptor (agg_tls_on) and go through
 * it, so the code above them reads and writes messages as before. Close a
 * TLS socket with agg_tls_close; agg_tls_forget drops a stale session under
 * a descriptor number that is being reused.
 */
#ifndef AGG_TLS_H
#define AGG_TLS_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "agg/auth.h"
#include "agg/status.h"

#define AGG_TLS_PSK_IDENTITY "agg-control-v1"
#define AGG_TLS_PSK_LABEL    "agg control plane TLS 1.3 PSK v1"
#define AGG_TLS_MAX_FD       65536 /* descriptors above this cannot carry TLS */

/*
 * The client's (connecting) or server's (accepting) handshake on a connected
 * TCP socket, which it makes non-blocking, within timeout_ms. On failure why
 * says what went wrong (a wrong secret among the reasons) and the socket is
 * left open, without a session.
 */
agg_status_t agg_tls_client(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                            size_t whylen);
agg_status_t agg_tls_server(int fd, const agg_auth_t *a, int timeout_ms, char *why,
                            size_t whylen);

/* Is there a TLS session on fd? One load; safe from any thread. */
int agg_tls_on(int fd);

/*
 * As recv(fd, buf, len, MSG_DONTWAIT) and sendmsg(MSG_DONTWAIT) on fd's
 * session: the byte count, 0 at the peer's end, or -1 with errno (EAGAIN:
 * try again when poll says; EPROTO: the record did not verify). A retried
 * send must offer at least the bytes the failed one did (as a stream does).
 */
ssize_t agg_tls_recv(int fd, void *buf, size_t len);
ssize_t agg_tls_sendv(int fd, const struct iovec *iov, int iovcnt);

/* Bytes decrypted and waiting in fd's session, which poll() cannot see. */
int agg_tls_pending(int fd);

/* Ends fd's session and closes fd. Plain sockets are just closed. */
void agg_tls_close(int fd);

/* Drops a session left under fd's number, without touching fd. */
void agg_tls_forget(int fd);

/* The first bytes on fd are a TLS record (a ClientHello), peeked, not read:
 * 1 yes, 0 no, -1 nothing came within timeout_ms or the peer closed. */
int agg_tls_peek_hello(int fd, int timeout_ms);

#endif
