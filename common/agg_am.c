/*
 * The one way every program reaches the aggregation manager: its address, a
 * bounded wait, TLS 1.3 keyed by the shared secret (off loopback always, on
 * loopback when a secret is set), and a message that says what to check.
 */
#include "agg/am.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/auth.h"
#include "agg/sock.h"
#include "agg/tls.h"

/*
 * Off loopback aggmgr speaks only TLS keyed by the shared secret; on
 * loopback too when it holds one, so a client that holds one speaks TLS
 * everywhere, and one without speaks plain to a local manager only.
 */
static agg_status_t agg__am_prove(const agg_am_target_t *t, int sock, int *fd, char *err,
                                  size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    agg_auth_t auth;
    char why[256];
    agg_status_t st;
    int local = getpeername(sock, (struct sockaddr *)&ss, &len) == 0 &&
                agg_auth_addr_is_loopback((struct sockaddr *)&ss);

    st = agg_auth_load(&auth, t->key_file, why, sizeof(why));
    if (st == AGG_OK && !auth.set && local) {
        return AGG_OK;
    }
    if (st == AGG_OK) {
        st = agg_tls_client(sock, &auth, t->timeout_ms, why, sizeof(why));
    }
    memset(&auth, 0, sizeof(auth));
    if (st != AGG_OK) {
        agg_errf(err, errlen, "aggregation manager at %s: %s", t->addr, why);
        close(sock);
        *fd = -1;
        return AGG_ERR_AUTH;
    }
    return AGG_OK;
}

agg_status_t agg_am_connect(const agg_am_target_t *t, int retry_ms, int *fd, char *err,
                            size_t errlen)
{
    const char *addr = t->addr;
    int64_t deadline = agg_time_ms() + retry_ms;
    char host[256];
    int port;
    agg_status_t st;

    if (agg_sock_addr_parse(addr, host, sizeof(host), &port, NULL, 0) != AGG_OK) {
        agg_errf(err, errlen, "bad aggregation manager address '%s'; set AGG_AM_ADDR=host:port",
                 addr);
        return AGG_ERR_SESSION_INIT;
    }
    for (;;) {
        st = agg_sock_connect(host, port, t->timeout_ms, fd);
        if (st == AGG_OK) {
            return agg__am_prove(t, *fd, fd, err, errlen);
        }
        if (agg_time_ms() >= deadline) {
            break;
        }
        usleep(20000);
    }
    agg_errf(err, errlen, "cannot connect to the aggregation manager at %s (%s); is aggmgr "
             "running? Set AGG_AM_ADDR=host:port", addr,
             st == AGG_ERR_TIMEOUT ? "timed out" : "connection refused");
    *fd = -1;
    return AGG_ERR_SESSION_INIT;
}
