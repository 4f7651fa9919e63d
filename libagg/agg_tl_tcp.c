/*
 * The TCP transport: a member whose leaf aggregation node is hosted by a
 * switchsim on another host sends each fragment to it over one TCP
 * connection (agg/net.h) and receives each result back on it. Results
 * arrive in the order the tree completes them; each lands in the window
 * slot of its fragment, so complete() finds it whatever the order.
 *
 * A SAT group's member opens tcp_lanes connections (AGG_TCP_LANES; LLT
 * groups one): the chunks of a call of several go up in turn on each, and
 * a result comes down on its chunk's, so several TCP flows carry the
 * stream, driven by the calling thread alone (no hand-over between
 * threads). A call of one chunk takes lane 0: turning over idle flows
 * costs a small call more than they give it.
 *
 * Nothing is allocated per fragment: the result slots are made at attach.
 * A fragment costs one sendmsg (header and data together) and the reads of
 * its result.
 */
#include "agg_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/auth.h"
#include "agg/log.h"
#include "agg/net.h"
#include "agg/reduce.h"
#include "agg/sock.h"

typedef struct agg__tl_tcp_res {
    uint64_t n;      /* fragment whose result is here; 0: none */
    int32_t  status;
    uint32_t count;
    uint8_t *data;   /* count elements of the wire type */
    /* where the fragment posted in this slot wants its result: when that is
       all of it, in host memory, the result is read straight there */
    uint64_t post_n;
    uint32_t post_count;
    uint8_t  post_dtype;
    uint8_t  post_kind;
    void    *direct;
    size_t   direct_bytes;
    int      landed;  /* this result went straight to `direct` */
    uint32_t lane;    /* the connection it went up on, and comes back on */
    int64_t  wait_ms; /* when a waiter first found its result missing; 0 not yet */
    uint32_t resends; /* times it went again */
} agg__tl_tcp_res_t;

/* One connection of the member and the message being received on it. */
typedef struct agg__tl_tcp_lane {
    int           fd;
    agg_net_msg_t rx;
    size_t        rx_got;     /* bytes of header, then of data, in */
    uint8_t      *rx_dst;     /* where its data goes; NULL: header not complete */
    int           rx_discard; /* it goes to t->discard: nobody waits for it */
} agg__tl_tcp_lane_t;

typedef struct agg__tl_tcp {
    int                dead;       /* a connection is gone: every wait ends */
    agg_net_msg_t      hello;      /* the identity every message repeats */
    uint32_t           window;
    uint32_t           payload;
    agg__tl_tcp_res_t *res;        /* window entries, by (n - 1) % window */
    uint8_t           *res_mem;
    uint32_t           lanes;
    uint32_t           next_lane;  /* the next chunk of a call of several goes there */
    agg__tl_tcp_lane_t lane[AGG_NET_MAX_LANES];
    struct pollfd      pfd[AGG_NET_MAX_LANES];
    int                send_timeout_ms;
    int                slice_ms;
    int                resend_ms;  /* net_resend_ms */
    uint8_t           *discard;    /* a result nobody waits for is read here */
} agg__tl_tcp_t;

static void agg__tl_tcp_free(agg__tl_tcp_t *t)
{
    uint32_t l;

    for (l = 0; l < AGG_NET_MAX_LANES; ++l) {
        if (t->lane[l].fd >= 0) {
            close(t->lane[l].fd);
        }
    }
    free(t->res);
    free(t->res_mem);
    free(t->discard);
    free(t);
}

/* A switchsim listening off loopback asks for the shared secret first. */
static int agg__tl_tcp_off_loopback(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    return getpeername(fd, (struct sockaddr *)&ss, &len) != 0 ||
           !agg_auth_addr_is_loopback((struct sockaddr *)&ss);
}

/* Opens lane `l`: connect, the secret off loopback, HELLO and its answer. */
static agg_status_t agg__tl_tcp_join(agg_context_t *ctx, agg__tl_tcp_t *t, uint32_t l,
                                     const agg_net_ep_t *ep, int rank)
{
    agg_net_msg_t hello = t->hello, reply;
    char why[256];
    agg_status_t st;
    int fd;

    st = agg_sock_connect(ep->host, ep->port, ctx->connect_timeout_ms, &t->lane[l].fd);
    if (st != AGG_OK) {
        agg_error("rank %d: cannot reach switchsim at %s:%d for group %u: %s", rank, ep->host,
                  ep->port, ep->group_id, agg_status_string(st));
        return st;
    }
    fd = t->lane[l].fd;
    agg_net_tune(fd);
    if (agg__tl_tcp_off_loopback(fd)) {
        st = agg_auth_client(fd, &ctx->auth, ctx->connect_timeout_ms, why, sizeof(why));
        if (st != AGG_OK) {
            agg_error("rank %d: switchsim at %s:%d: %s", rank, ep->host, ep->port, why);
            return st;
        }
    }
    hello.desc.root = l;
    st = agg_net_send(fd, &hello, NULL, ctx->connect_timeout_ms, NULL, NULL);
    if (st == AGG_OK) {
        st = agg_sock_recv_all(fd, &reply, sizeof(reply), ctx->connect_timeout_ms);
    }
    if (st == AGG_OK && (reply.magic != AGG_NET_MAGIC || reply.type != AGG_NET_HELLO ||
                         !agg_net_intact(&reply, NULL) ||
                         reply.bytes != 0)) {
        st = AGG_ERR_PROTOCOL;
    }
    if (st == AGG_OK && reply.status != AGG_OK) {
        st = reply.status;
    }
    if (st != AGG_OK) {
        agg_error("rank %d: switchsim at %s:%d refused group %u channel %u (connection %u of "
                  "%u): %s", rank, ep->host, ep->port, ep->group_id, hello.channel, l + 1,
                  t->lanes, agg_status_string(st));
    }
    return st;
}

static agg_status_t agg__tl_tcp_attach(agg_context_t *ctx, const agg__tree_info_t *info,
                                       int rank, void **out)
{
    agg_net_ep_t ep;
    agg__tl_tcp_t *t;
    char why[256];
    agg_status_t st;
    uint32_t i;

    st = agg_net_ep_parse(info->ep.addr, info->ep.length, &ep, why, sizeof(why));
    if (st != AGG_OK || ep.tree != info->tree) {
        agg_error("rank %d: %s", rank, st != AGG_OK ? why : "TCP endpoint of another tree");
        return AGG_ERR_GROUP_JOIN;
    }
    if (info->osts == 0 || info->osts > 4096 || info->payload == 0 ||
        info->payload > (64u << 20)) {
        agg_error("rank %d: %u fragments of %u bytes in flight: not a TCP group", rank,
                  info->osts, info->payload);
        return AGG_ERR_GROUP_JOIN;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < AGG_NET_MAX_LANES; ++i) {
        t->lane[i].fd = -1;
    }
    /* a SAT stream over several flows; LLT fragments are too small to gain */
    t->lanes           = info->tree == AGG_TREE_SAT && info->osts < AGG_NET_LANE_RING ?
                         ctx->tcp_lanes : 1;
    t->window          = info->osts;
    t->payload         = info->payload;
    t->send_timeout_ms = ctx->alike.coll_timeout_ms > 0 ? ctx->alike.coll_timeout_ms : 30000;
    t->slice_ms        = ctx->progress != NULL ? 1 : 10;
    t->res             = calloc(t->window, sizeof(*t->res));
    t->res_mem         = malloc((size_t)t->window * t->payload);
    t->discard         = malloc(t->payload);
    t->resend_ms       = ctx->net_resend_ms;
    if (t->res == NULL || t->res_mem == NULL || t->discard == NULL) {
        agg__tl_tcp_free(t);
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < t->window; ++i) {
        t->res[i].data = t->res_mem + (size_t)i * t->payload;
    }
    t->hello = (agg_net_msg_t){
        .magic = AGG_NET_MAGIC, .type = AGG_NET_HELLO, .tree = (uint8_t)info->tree,
        .group_id = ep.group_id, .part = ep.part, .channel = info->channel,
        .desc.count = info->osts, .desc.total = info->payload, .n = ctx->job_key, .len = t->lanes,
    };
    for (i = 0; i < t->lanes; ++i) {
        st = agg__tl_tcp_join(ctx, t, i, &ep, rank);
        if (st != AGG_OK) {
            goto err;
        }
        t->pfd[i] = (struct pollfd){.fd = t->lane[i].fd, .events = POLLIN};
    }
    agg_debug("rank %d: %s group %u part %u channel %u over TCP to %s:%d, %u fragments of "
              "%u bytes in flight on %u connection%s", rank,
              info->tree == AGG_TREE_SAT ? "SAT" : "LLT", ep.group_id, ep.part, info->channel,
              ep.host, ep.port, info->osts, info->payload, t->lanes, t->lanes > 1 ? "s" : "");
    *out = t;
    return AGG_OK;

err:
    agg__tl_tcp_free(t);
    return st == AGG_ERR_NO_MEMORY ? st : AGG_ERR_GROUP_JOIN;
}

static void agg__tl_tcp_detach(void *tlp)
{
    if (tlp != NULL) {
        agg__tl_tcp_free(tlp);
    }
}

static int agg__tl_tcp_drain(agg__tl_tcp_t *t);

/* Reads results while a send waits for room (agg_net_send's readable). */
static int agg__tl_tcp_readable(void *arg)
{
    return agg__tl_tcp_drain(arg);
}

/* Sends fragment f on the lane its result slot names (again, for a resend). */
static void agg__tl_tcp_send(agg__tl_tcp_t *t, const agg_tl_frag_t *f)
{
    agg_net_msg_t m = t->hello;
    size_t esize = agg_dtype_size(f->desc.dtype);
    agg_status_t st;

    m.type   = AGG_NET_PUSH; /* the HELLO's identity, without the job's key */
    m.desc   = f->desc;
    m.status = f->status;
    m.n      = f->n;
    m.off    = f->src_off;
    m.len    = f->src_len;
    m.bytes  = 0;
    if (f->status == AGG_OK && f->empty) {
        m.flags = AGG_NET_F_EMPTY;
    } else if (f->status == AGG_OK && f->desc.kind == AGG_DP_KIND_DATA) {
        m.bytes = (uint32_t)((f->desc.coll == AGG_DP_COLL_ALLGATHER ? f->src_len
                                                                    : f->desc.count) * esize);
    }
    /* switchsim answers on this connection and may itself wait for room to
       send: read while writing, or both could wait */
    st = agg_net_send(t->lane[t->res[(f->n - 1) % t->window].lane].fd, &m, f->src,
                      t->send_timeout_ms, agg__tl_tcp_readable, t);
    if (st != AGG_OK) {
        agg_error("group %u: sending fragment %llu to switchsim failed: %s", m.group_id,
                  (unsigned long long)f->n, agg_status_string(st));
        t->dead = 1; /* complete() says the group is gone, for this and the rest */
    }
}

static agg_status_t agg__tl_tcp_post(void *tlp, const agg_tl_frag_t *f)
{
    agg__tl_tcp_t *t = tlp;
    size_t esize = agg_dtype_size(f->desc.dtype);

    if (t->dead) {
        return AGG_OK; /* taken, to fail at complete(): the group is gone */
    }
    {
        agg__tl_tcp_res_t *r = &t->res[(f->n - 1) % t->window];

        r->wait_ms      = 0;
        r->resends      = 0;
        r->post_n       = f->n;
        r->post_count   = f->desc.count;
        r->post_dtype   = f->desc.dtype;
        r->post_kind    = f->desc.kind;
        r->direct       = NULL;
        r->direct_bytes = 0;
        r->lane         = 0;
        if (t->lanes > 1 && f->desc.kind == AGG_DP_KIND_DATA && f->desc.count != f->desc.total) {
            r->lane      = t->next_lane;
            t->next_lane = (t->next_lane + 1) % t->lanes;
        }
        if (f->dst != NULL && f->dst_mem == AGG_MEM_HOST && !f->at_complete &&
            f->desc.kind == AGG_DP_KIND_DATA &&
            f->dst_off == 0 && f->dst_len == f->desc.count && f->desc.count > 0) {
            r->direct       = f->dst;
            r->direct_bytes = (size_t)f->desc.count * esize;
        }
    }
    agg__tl_tcp_send(t, f);
    return AGG_OK;
}

static void agg__tl_tcp_flush(void *tlp)
{
    (void)tlp;
}

/* The header is in: checks it and says where its data go. */
static agg_status_t agg__tl_tcp_rx_header(agg__tl_tcp_t *t, agg__tl_tcp_lane_t *ln)
{
    agg_net_msg_t *m = &ln->rx;
    agg__tl_tcp_res_t *r;

    if (m->magic != AGG_NET_MAGIC || m->type != AGG_NET_RESULT || m->n == 0 ||
        m->group_id != t->hello.group_id || m->bytes > t->payload ||
        (m->bytes != 0 && m->bytes != (uint64_t)m->desc.count * agg_dtype_size(m->desc.dtype))) {
        agg_error("group %u: malformed result from switchsim (type %u, fragment %llu, %u bytes)",
                  t->hello.group_id, m->type, (unsigned long long)m->n, m->bytes);
        return AGG_ERR_PROTOCOL;
    }
    r = &t->res[(m->n - 1) % t->window];
    if (m->n < r->post_n || (m->n == r->post_n && r->n == m->n)) {
        /* a result had twice, or of a fragment that went again and whose
           first result came: nobody waits for it (its place may be the
           caller's again) */
        ln->rx_dst     = t->discard;
        ln->rx_discard = 1;
        return AGG_OK;
    }
    if (r->post_n != m->n || r->lane != (uint32_t)(ln - t->lane) ||
        m->desc.dtype != r->post_dtype || m->desc.count != r->post_count ||
        m->desc.kind != r->post_kind ||
        (m->status == AGG_OK && m->desc.kind == AGG_DP_KIND_DATA && m->desc.count > 0 &&
         m->bytes != (uint64_t)m->desc.count * agg_dtype_size(m->desc.dtype))) {
        agg_error("group %u: result %llu from switchsim does not match its fragment "
                  "(%u elements of type %u, %u bytes)", t->hello.group_id,
                  (unsigned long long)m->n, m->desc.count, m->desc.dtype, m->bytes);
        return AGG_ERR_PROTOCOL;
    }
    r->landed = r->direct != NULL && m->status == AGG_OK && m->bytes == r->direct_bytes;
    ln->rx_dst = r->landed ? r->direct : r->data;
    return AGG_OK;
}

/* Reads what has arrived on one lane; returns results completed, -1 when it is gone. */
static int agg__tl_tcp_drain_lane(agg__tl_tcp_t *t, agg__tl_tcp_lane_t *ln)
{
    int done = 0;

    while (!t->dead) {
        uint8_t *dst;
        size_t want;
        ssize_t rc;

        if (ln->rx_dst == NULL) {
            dst  = (uint8_t *)&ln->rx + ln->rx_got;
            want = sizeof(ln->rx) - ln->rx_got;
        } else {
            dst  = ln->rx_dst + (ln->rx_got - sizeof(ln->rx));
            want = sizeof(ln->rx) + ln->rx.bytes - ln->rx_got;
        }
        rc = want > 0 ? recv(ln->fd, dst, want, MSG_DONTWAIT) : 0;
        if (rc < 0 && errno == EINTR) {
            continue;
        }
        if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        }
        if (want > 0 && rc <= 0) {
            /* every member sees it: the first channel says it for the group */
            if (t->hello.channel == 0) {
                agg_error("group %u: switchsim closed the connection", t->hello.group_id);
            } else {
                agg_debug("group %u: switchsim closed the connection", t->hello.group_id);
            }
            t->dead = 1;
            break;
        }
        ln->rx_got += (size_t)rc;
        if (ln->rx_dst == NULL && ln->rx_got == sizeof(ln->rx)) {
            if (agg__tl_tcp_rx_header(t, ln) != AGG_OK) {
                t->dead = 1;
                break;
            }
        }
        if (ln->rx_dst != NULL && ln->rx_got == sizeof(ln->rx) + ln->rx.bytes &&
            (ln->rx_discard || !agg_net_intact(&ln->rx, ln->rx_dst))) {
            if (!ln->rx_discard) {
                /* taken for lost: the fragment goes again and its result comes again
                   (what landed in the caller's buffer is written over then) */
                agg_debug("group %u: result %llu does not match its checksum",
                          t->hello.group_id, (unsigned long long)ln->rx.n);
            }
            ln->rx_dst     = NULL;
            ln->rx_got     = 0;
            ln->rx_discard = 0;
        } else if (ln->rx_dst != NULL && ln->rx_got == sizeof(ln->rx) + ln->rx.bytes) {
            agg__tl_tcp_res_t *r = &t->res[(ln->rx.n - 1) % t->window];

            r->status = ln->rx.status;
            r->count  = ln->rx.desc.count;
            __atomic_store_n(&r->n, ln->rx.n, __ATOMIC_RELEASE);
            ln->rx_dst = NULL;
            ln->rx_got = 0;
            done++;
        }
    }
    return t->dead ? -1 : done;
}

/* Reads what has arrived on every lane; returns results completed, or -1 when one is gone. */
static int agg__tl_tcp_drain(agg__tl_tcp_t *t)
{
    int done = 0, n;
    uint32_t l;

    for (l = 0; l < t->lanes; ++l) {
        n = agg__tl_tcp_drain_lane(t, &t->lane[l]);
        if (n < 0) {
            return -1;
        }
        done += n;
    }
    return done;
}

static agg_status_t agg__tl_tcp_complete(void *tlp, const agg_tl_frag_t *f)
{
    agg__tl_tcp_t *t = tlp;
    agg__tl_tcp_res_t *r = &t->res[(f->n - 1) % t->window];
    size_t esize = agg_dtype_size(f->desc.dtype);

    if (r->n != f->n) {
        agg__tl_tcp_drain(t);
        if (r->n != f->n) {
            return t->dead ? AGG_ERR_SHUTDOWN : AGG_INPROGRESS;
        }
    }
    if (r->status == AGG_OK && f->dst != NULL && f->desc.kind == AGG_DP_KIND_DATA && !r->landed &&
        f->dst_len > 0 && (uint64_t)f->dst_off + f->dst_len <= r->count) {
        memcpy(f->dst, r->data + (size_t)f->dst_off * esize, (size_t)f->dst_len * esize);
    }
    return r->status;
}

static unsigned agg__tl_tcp_progress(void *tlp)
{
    int n = agg__tl_tcp_drain(tlp);

    return n > 0 ? (unsigned)n : 0;
}

/*
 * Nothing came: f's result is missing. After net_resend_ms (then twice as
 * long, and so on) f goes again: its message or its result was lost on the
 * way, and switchsim, which takes a fragment once, sends the result it has
 * again. Not while its result is being read (its source may be the place
 * the result lands).
 */
static void agg__tl_tcp_idle(void *tlp, const agg_tl_frag_t *f)
{
    agg__tl_tcp_t *t = tlp;
    agg__tl_tcp_res_t *r = &t->res[(f->n - 1) % t->window];
    int64_t now;

    if (t->dead) {
        return;
    }
    if (poll(t->pfd, t->lanes, t->slice_ms) > 0 || r->post_n != f->n || r->n == f->n) {
        return;
    }
    now = agg_time_ms();
    if (r->wait_ms == 0) {
        r->wait_ms = now;
    } else if (now - r->wait_ms >= ((int64_t)t->resend_ms << (r->resends < 16 ? r->resends : 16)) &&
               (r->direct == NULL || t->lane[r->lane].rx_dst != r->direct)) {
        agg_debug("group %u: no result for fragment %llu after %lld ms: sending it again",
                  t->hello.group_id, (unsigned long long)f->n, (long long)(now - r->wait_ms));
        r->resends++;
        r->wait_ms = now;
        agg__tl_tcp_send(t, f);
    }
}

static void agg__tl_tcp_busy(void *tlp)
{
    (void)tlp;
}

static void agg__tl_tcp_forget(void *tlp, const agg_tl_frag_t *f)
{
    agg__tl_tcp_t *t = tlp;
    agg__tl_tcp_res_t *r = &t->res[(f->n - 1) % t->window];
    agg__tl_tcp_lane_t *ln;

    if (r->post_n != f->n || r->direct == NULL) {
        return;
    }
    /* a result being read into the caller's buffer goes on into the slot */
    ln = &t->lane[r->lane];
    if (ln->rx_dst == r->direct) {
        ln->rx_dst = r->data;
        r->landed  = 0;
    }
    r->direct       = NULL;
    r->direct_bytes = 0;
}

/* Host memory; a result is read from the socket straight into dst as it arrives. */
static void agg__tl_tcp_query(agg_tl_attr_t *attr)
{
    *attr = (agg_tl_attr_t){.mem_types = 1u << AGG_MEM_HOST, .results_at_complete = 0};
}

const agg_tl_ops_t agg_tl_tcp_ops = {
    .name     = "tcp",
    .type     = AGG_TL_TCP,
    .query    = agg__tl_tcp_query,
    .attach   = agg__tl_tcp_attach,
    .detach   = agg__tl_tcp_detach,
    .post     = agg__tl_tcp_post,
    .flush    = agg__tl_tcp_flush,
    .complete = agg__tl_tcp_complete,
    .progress = agg__tl_tcp_progress,
    .idle     = agg__tl_tcp_idle,
    .busy     = agg__tl_tcp_busy,
    .forget   = agg__tl_tcp_forget,
};
