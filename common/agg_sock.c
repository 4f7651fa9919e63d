#include "agg/sock.h"
#include "agg/log.h"
#include "agg/tls.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

int64_t agg_time_ms(void)
{
    return (int64_t)(agg_time_ns() / 1000000u);
}

uint64_t agg_time_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static agg_status_t agg__sock_resolve(const char *host, int port,
                                      struct sockaddr_storage *ss, socklen_t *len)
{
    struct addrinfo hints = {0}, *res = NULL;
    char portstr[16];
    int rc;

    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = AI_NUMERICSERV;
    snprintf(portstr, sizeof(portstr), "%d", port);
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0 || res == NULL) {
        agg_debug("cannot resolve %s: %s", host, gai_strerror(rc));
        return AGG_ERR_INVALID_PARAM;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return AGG_OK;
}

agg_status_t agg_sock_listen(const char *host, int port, int *fd_out, int *bound_port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd, one = 1;

    if (agg__sock_resolve(host, port, &ss, &len) != AGG_OK) {
        agg_error("cannot resolve listen address %s:%d", host, port);
        return AGG_ERR_INVALID_PARAM;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        agg_error("socket() failed: %s", strerror(errno));
        return AGG_ERR_IO;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        agg_debug("bind(%s:%d) failed: %s", host, port, strerror(errno));
        close(fd);
        return errno == EADDRINUSE ? AGG_ERR_IO : AGG_ERR_INVALID_PARAM;
    }
    if (listen(fd, SOMAXCONN) != 0) { /* a large job's ranks connect at once */
        agg_error("listen(%s:%d) failed: %s", host, port, strerror(errno));
        close(fd);
        return AGG_ERR_IO;
    }
    len = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &len);
    if (bound_port != NULL) {
        *bound_port = ntohs(ss.ss_family == AF_INET6 ?
                            ((struct sockaddr_in6 *)&ss)->sin6_port :
                            ((struct sockaddr_in *)&ss)->sin_port);
    }
    *fd_out = fd;
    return AGG_OK;
}

void agg_sock_nodelay(int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

agg_status_t agg_sock_connect(const char *host, int port, int timeout_ms, int *fd_out)
{
    struct sockaddr_storage ss;
    struct pollfd pfd;
    socklen_t len;
    int fd, err = 0, flags;
    socklen_t errlen = sizeof(err);

    if (agg__sock_resolve(host, port, &ss, &len) != AGG_OK) {
        return AGG_ERR_INVALID_PARAM;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    agg_tls_forget(fd); /* a closed TLS socket's session left under this number */
    if (fd < 0) {
        return AGG_ERR_IO;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        if (errno != EINPROGRESS) {
            goto err_close;
        }
        pfd.fd     = fd;
        pfd.events = POLLOUT;
        if (poll(&pfd, 1, timeout_ms) <= 0) {
            close(fd);
            return AGG_ERR_TIMEOUT;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) != 0 || err != 0) {
            errno = err;
            goto err_close;
        }
    }
    flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    agg_sock_nodelay(fd);
    *fd_out = fd;
    return AGG_OK;

err_close:
    close(fd);
    return AGG_ERR_SESSION_INIT;
}

static agg_status_t agg__sock_wait(int fd, short events, int64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    int64_t left;
    int rc;

    for (;;) {
        left = deadline - agg_time_ms();
        if (left < 0) {
            return AGG_ERR_TIMEOUT;
        }
        rc = poll(&pfd, 1, (int)left);
        if (rc > 0) {
            return AGG_OK;
        }
        if (rc == 0) {
            return AGG_ERR_TIMEOUT;
        }
        if (errno != EINTR) {
            return AGG_ERR_IO;
        }
    }
}

static agg_status_t agg__sock_send(int fd, const void *buf, size_t len, int timeout_ms,
                                   int more)
{
    const uint8_t *p = buf;
    int64_t deadline = agg_time_ms() + timeout_ms;
    agg_status_t st;
    ssize_t n;

    while (len > 0) {
        if (agg_tls_on(fd)) {
            struct iovec v = {(void *)p, len};

            n = agg_tls_sendv(fd, &v, 1);
        } else {
            n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
        }
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            st = agg__sock_wait(fd, POLLOUT, deadline);
            if (st != AGG_OK) {
                return st;
            }
            continue;
        }
        return AGG_ERR_IO;
    }
    return AGG_OK;
}

/* A header and its body through fd's TLS session, sharing records. */
static agg_status_t agg__sock_sendv_tls(int fd, const void *hdr, size_t hdr_len,
                                        const void *body, size_t len, int timeout_ms)
{
    struct iovec v[2] = {{(void *)hdr, hdr_len}, {(void *)body, len}};
    int64_t deadline = agg_time_ms() + timeout_ms;
    int first = 0;
    agg_status_t st;
    ssize_t n;

    while (first < 2) {
        n = agg_tls_sendv(fd, v + first, 2 - first);
        if (n < 0 && errno == EAGAIN) {
            st = agg__sock_wait(fd, POLLOUT, deadline);
            if (st != AGG_OK) {
                return st;
            }
            continue;
        }
        if (n <= 0) {
            return AGG_ERR_IO;
        }
        while (first < 2 && (size_t)n >= v[first].iov_len) {
            n -= (ssize_t)v[first].iov_len;
            first++;
        }
        if (first < 2) {
            v[first].iov_base = (uint8_t *)v[first].iov_base + n;
            v[first].iov_len -= (size_t)n;
        }
    }
    return AGG_OK;
}

agg_status_t agg_sock_send_all(int fd, const void *buf, size_t len, int timeout_ms)
{
    return agg__sock_send(fd, buf, len, timeout_ms, 0);
}

ssize_t agg_sock_recv_some(int fd, void *buf, size_t len)
{
    return agg_tls_on(fd) ? agg_tls_recv(fd, buf, len) : recv(fd, buf, len, MSG_DONTWAIT);
}

agg_status_t agg_sock_recv_all(int fd, void *buf, size_t len, int timeout_ms)
{
    uint8_t *p = buf;
    int64_t deadline = agg_time_ms() + timeout_ms;
    agg_status_t st;
    ssize_t n;

    while (len > 0) {
        n = agg_sock_recv_some(fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            return AGG_ERR_IO; /* peer closed */
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            st = agg__sock_wait(fd, POLLIN, deadline);
            if (st != AGG_OK) {
                return st;
            }
            continue;
        }
        return AGG_ERR_IO;
    }
    return AGG_OK;
}

agg_status_t agg_msg_send(int fd, uint16_t type, uint32_t txid, const void *body,
                          size_t len, int timeout_ms)
{
    agg_msg_hdr_t hdr;
    agg_status_t st;

    if (len > AGG_WIRE_MAX_BODY) {
        return AGG_ERR_INVALID_PARAM;
    }
    agg_wire_hdr_encode(&hdr, type, (uint32_t)len, txid);
    if (agg_tls_on(fd) && len > 0) {
        /* header and body in one record (two would wait on each other's ACK) */
        return agg__sock_sendv_tls(fd, &hdr, sizeof(hdr), body, len, timeout_ms);
    }
    /* MSG_MORE keeps header and body in one segment: a lone header would
     * otherwise wait for the peer's delayed ACK (40 ms) under Nagle. */
    st = agg__sock_send(fd, &hdr, sizeof(hdr), timeout_ms, len > 0);
    if (st == AGG_OK && len > 0) {
        st = agg_sock_send_all(fd, body, len, timeout_ms);
    }
    return st;
}

agg_status_t agg_msg_recv(int fd, agg_msg_hdr_t *hdr, void *body, size_t cap,
                          int timeout_ms)
{
    agg_status_t st;

    st = agg_sock_recv_all(fd, hdr, sizeof(*hdr), timeout_ms);
    if (st != AGG_OK) {
        return st;
    }
    st = agg_wire_hdr_decode(hdr);
    if (st != AGG_OK) {
        return st;
    }
    if (hdr->length > cap) {
        return AGG_ERR_PROTOCOL;
    }
    if (hdr->length > 0) {
        st = agg_sock_recv_all(fd, body, hdr->length, timeout_ms);
    }
    return st;
}

agg_status_t agg_msg_call(int fd, uint16_t type, const void *body, size_t len,
                          uint16_t reply_type, void *reply, size_t cap,
                          size_t *reply_len, int timeout_ms)
{
    static uint32_t next_txid = 1;
    uint32_t txid = __atomic_fetch_add(&next_txid, 1, __ATOMIC_RELAXED);
    int64_t end = agg_time_ms() + timeout_ms;
    agg_msg_hdr_t hdr;
    agg_status_t st;

    st = agg_msg_send(fd, type, txid, body, len, timeout_ms);
    if (st != AGG_OK) {
        return st;
    }
    for (;;) {
        int left = (int)(end - agg_time_ms());

        st = agg_msg_recv(fd, &hdr, reply, cap, left > 0 ? left : 1);
        if (st != AGG_OK) {
            return st;
        }
        if (hdr.txid == txid || (int32_t)(txid - hdr.txid) <= 0) {
            break;
        }
        /* the answer to an earlier request this side gave up waiting for */
        agg_info("dropped a late %s (txid %u) while waiting for txid %u",
                 agg_msg_type_name(hdr.type), hdr.txid, txid);
    }
    if (hdr.txid != txid || (hdr.type != reply_type && hdr.type != AGG_MSG_ERROR_REPLY)) {
        agg_error("expected %s (txid %u), received %s (txid %u)",
                  agg_msg_type_name(reply_type), txid, agg_msg_type_name(hdr.type),
                  hdr.txid);
        return AGG_ERR_PROTOCOL;
    }
    if (hdr.length < sizeof(int32_t)) {
        return AGG_ERR_PROTOCOL;
    }
    *reply_len = hdr.length;
    return AGG_OK;
}

agg_status_t agg_msg_call_status(int fd, uint16_t type, const void *body, size_t len,
                                 uint16_t reply_type, int timeout_ms)
{
    agg_msg_status_t rep;
    size_t rep_len;
    agg_status_t st;

    st = agg_msg_call(fd, type, body, len, reply_type, &rep, sizeof(rep), &rep_len,
                      timeout_ms);
    if (st != AGG_OK) {
        return st;
    }
    agg_wire_swap(&rep, AGG_FMT_STATUS, 1);
    return (agg_status_t)rep.status;
}

void agg_sock_addr_string(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    socklen_t salen = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
                                                  sizeof(struct sockaddr_in);

    if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(buf, len, "?");
        return;
    }
    snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
}

agg_status_t agg_sock_addr_parse(const char *addr, char *host, size_t hostlen, int *port,
                                 char *why, size_t whylen)
{
    const char *hbeg = addr, *ptext;
    size_t hlen, i;
    long val = 0;

    if (addr == NULL) {
        snprintf(why, whylen, "no address");
        return AGG_ERR_INVALID_PARAM;
    }
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');

        if (close == NULL) {
            snprintf(why, whylen, "missing ']' after an IPv6 address");
            return AGG_ERR_PARSE;
        }
        hbeg = addr + 1;
        hlen = (size_t)(close - hbeg);
        if (close[1] != ':') {
            snprintf(why, whylen, "missing ':port' after ']'");
            return AGG_ERR_PARSE;
        }
        ptext = close + 2;
    } else {
        const char *colon = strrchr(addr, ':');

        if (colon == NULL) {
            snprintf(why, whylen, "missing ':port'");
            return AGG_ERR_PARSE;
        }
        hlen = (size_t)(colon - addr);
        if (memchr(addr, ':', hlen) != NULL) {
            snprintf(why, whylen, "an IPv6 address needs brackets, e.g. [::1]:6126");
            return AGG_ERR_PARSE;
        }
        ptext = colon + 1;
    }
    if (hlen == 0) {
        snprintf(why, whylen, "empty host");
        return AGG_ERR_PARSE;
    }
    for (i = 0; i < hlen; i++) {
        if (isspace((unsigned char)hbeg[i]) || !isprint((unsigned char)hbeg[i])) {
            snprintf(why, whylen, "the host contains a space or control character");
            return AGG_ERR_PARSE;
        }
    }
    if (ptext[0] == '\0' || strlen(ptext) > 5 ||
        strspn(ptext, "0123456789") != strlen(ptext) ||
        (val = strtol(ptext, NULL, 10)) > 65535) {
        snprintf(why, whylen, "port '%.16s' is not a number in 0..65535", ptext);
        return AGG_ERR_PARSE;
    }
    if (host != NULL) {
        if (hlen >= hostlen) {
            snprintf(why, whylen, "host longer than %zu characters",
                     hostlen ? hostlen - 1 : 0);
            return AGG_ERR_INVALID_PARAM;
        }
        memcpy(host, hbeg, hlen);
        host[hlen] = '\0';
    }
    if (port != NULL) {
        *port = (int)val;
    }
    return AGG_OK;
}

void agg_sock_fd_limit(unsigned want)
{
    struct rlimit nofile;

    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < want) {
        nofile.rlim_cur = nofile.rlim_max < want ? nofile.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
}
