/*
 * TCP helpers for the control plane. Every call that waits takes a timeout
 * in milliseconds and fails with AGG_ERR_TIMEOUT rather than block forever.
 */
#ifndef AGG_SOCK_H
#define AGG_SOCK_H

#include <stddef.h>
#include <sys/socket.h>
#include <stdint.h>
#include "agg/status.h"
#include "agg/wire.h"

/* Listens on host:port (port 0 picks one); *bound_port gets the real port. */
agg_status_t agg_sock_listen(const char *host, int port, int *fd, int *bound_port);

/*
 * Splits "host:port" or "[v6addr]:port" into host (NUL-terminated, without
 * brackets) and port; host or port NULL: only checks. Returns AGG_ERR_PARSE
 * for a malformed address, AGG_ERR_INVALID_PARAM when host does not fit in
 * hostlen, with `why` (may be NULL) saying what is wrong; outputs are written
 * only on success.
 */
agg_status_t agg_sock_addr_parse(const char *addr, char *host, size_t hostlen, int *port,
                                 char *why, size_t whylen);

/* Connects to host:port within timeout_ms. */
agg_status_t agg_sock_connect(const char *host, int port, int timeout_ms, int *fd);

/* Small control messages go out at once (TCP_NODELAY). */
void agg_sock_nodelay(int fd);

/* Raises this process's descriptor limit to `want` where the hard limit allows (daemons). */
void agg_sock_fd_limit(unsigned want);

/* "ip:port" of a socket address, for log lines. */
void agg_sock_addr_string(const struct sockaddr *sa, char *buf, size_t len);

agg_status_t agg_sock_send_all(int fd, const void *buf, size_t len, int timeout_ms);
agg_status_t agg_sock_recv_all(int fd, void *buf, size_t len, int timeout_ms);
/* recv(MSG_DONTWAIT) on fd, or on its TLS session (agg/tls.h) where it has one. */
ssize_t agg_sock_recv_some(int fd, void *buf, size_t len);

/* Sends a header and a body that is already in wire order. */
agg_status_t agg_msg_send(int fd, uint16_t type, uint32_t txid, const void *body,
                          size_t len, int timeout_ms);

/*
 * Receives one message. The body (at most `cap` bytes, else AGG_ERR_PROTOCOL
 * and the connection should be dropped) is left in wire order in `body`;
 * hdr is decoded to host order.
 */
agg_status_t agg_msg_recv(int fd, agg_msg_hdr_t *hdr, void *body, size_t cap,
                          int timeout_ms);

/*
 * Sends a request and waits for the reply of type `reply_type` with the same
 * txid. On success *reply_len holds the body length (wire order left as is).
 */
agg_status_t agg_msg_call(int fd, uint16_t type, const void *body, size_t len,
                          uint16_t reply_type, void *reply, size_t cap,
                          size_t *reply_len, int timeout_ms);

/*
 * A request whose reply is a bare status: returns the transport error, or
 * the status the peer answered with.
 */
agg_status_t agg_msg_call_status(int fd, uint16_t type, const void *body, size_t len,
                                 uint16_t reply_type, int timeout_ms);

/* Monotonic clock in milliseconds and nanoseconds. */
int64_t agg_time_ms(void);
uint64_t agg_time_ns(void);

#endif
