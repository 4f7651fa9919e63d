/* Helpers of the TCP data path (agg/net.h). */
#include "agg/net.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <isa-l/crc.h>

#include "agg/log.h"
#include "agg/sock.h"

uint32_t agg_net_csum(const agg_net_msg_t *m, const void *data)
{
    agg_net_msg_t h = *m;
    uint32_t crc;

    h.csum = 0;
    crc    = crc32_iscsi((unsigned char *)&h, sizeof(h), 0xffffffffu);
    if (m->bytes > 0 && data != NULL) {
        crc = crc32_iscsi((unsigned char *)data, (int)m->bytes, crc);
    }
    return crc;
}

agg_status_t agg_net_ep_format(agg_wire_endpoint_t *ep, const char *addr, uint32_t group_id,
                               uint32_t tree, uint32_t part)
{
    int n = snprintf((char *)ep->addr, sizeof(ep->addr), "%s/g%u/t%u/p%u", addr, group_id,
                     tree, part);

    if (n < 0 || (size_t)n >= sizeof(ep->addr)) {
        return AGG_ERR_PARSE;
    }
    ep->transport = AGG_TL_TCP;
    ep->length    = (uint32_t)n + 1;
    return AGG_OK;
}

agg_status_t agg_net_ep_parse(const void *buf, size_t len, agg_net_ep_t *ep, char *why,
                              size_t whylen)
{
    char text[160], *slash, tail;
    const char *s = buf;

    if (len == 0 || len >= sizeof(text) || memchr(s, '\0', len) == NULL) {
        snprintf(why, whylen, "a TCP endpoint of %zu bytes is not a string", len);
        return AGG_ERR_PARSE;
    }
    memcpy(text, s, len);
    slash = strchr(text, '/');
    if (slash == NULL) {
        snprintf(why, whylen, "TCP endpoint \"%s\" has no /g<group>/t<tree>/p<part>", text);
        return AGG_ERR_PARSE;
    }
    *slash = '\0';
    if (sscanf(slash + 1, "g%u/t%u/p%u%c", &ep->group_id, &ep->tree, &ep->part, &tail) != 3 ||
        agg_sock_addr_parse(text, ep->host, sizeof(ep->host), &ep->port, NULL, 0) != AGG_OK ||
        ep->port == 0) {
        snprintf(why, whylen, "TCP endpoint \"%.*s\" is not host:port/g<group>/t<tree>/p<part>",
                 (int)len, s);
        return AGG_ERR_PARSE;
    }
    return AGG_OK;
}

agg_status_t agg_net_send(int fd, const agg_net_msg_t *m, const void *data, int timeout_ms,
                          int (*readable)(void *arg), void *arg)
{
    agg_net_msg_t h = *m;
    struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)data, m->bytes}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = m->bytes > 0 ? 2 : 1};
    int64_t deadline = -1;
    ssize_t rc;

    agg_net_seal(&h, data);
    for (;;) {
        rc = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (rc > 0) {
            size_t left = (size_t)rc;

            while (mh.msg_iovlen > 0 && left >= mh.msg_iov[0].iov_len) {
                left -= mh.msg_iov[0].iov_len;
                mh.msg_iov++;
                mh.msg_iovlen--;
            }
            if (mh.msg_iovlen == 0) {
                return AGG_OK;
            }
            mh.msg_iov[0].iov_base = (uint8_t *)mh.msg_iov[0].iov_base + left;
            mh.msg_iov[0].iov_len -= left;
            continue;
        }
        if (rc < 0 && errno == EINTR) {
            continue;
        }
        if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT | (readable ? POLLIN : 0)};
            int64_t now = agg_time_ms();

            if (deadline < 0) {
                deadline = now + timeout_ms;
            }
            if (now >= deadline) {
                return AGG_ERR_TIMEOUT;
            }
            /* with a reader, every 10 ms at least: it may read other sockets too */
            if ((poll(&pfd, 1, (int)(deadline - now < 10 || !readable ? deadline - now : 10)) >= 0 &&
                 readable && readable(arg) < 0)) {
                return AGG_ERR_IO;
            }
            continue;
        }
        return AGG_ERR_IO;
    }
}

void agg_net_tune(int fd)
{
    int one = 1, buf = 4 << 20;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* past net.core.[wr]mem_max where allowed (root): SAT windows of a few
       groups fit in flight */
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) != 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) != 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    }
}
