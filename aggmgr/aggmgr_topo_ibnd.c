/*
 * The ibnetdiscover reader: the id table, the checks that need the whole
 * file, and the move of what was read into an aggmgr_topo_t. The grammar of
 * one line is in aggmgr_topo_ibnd_line.c.
 *
 * Reader choices, and why:
 * - ibnetdiscover declares every link from both ends. Both must agree: a
 *   hand-edited file with a typo then fails at load time, with the line to
 *   fix, instead of giving a tree that uses a cable that does not exist.
 * - Routers (Rt blocks) are read and checked like any node, then dropped:
 *   aggregation never crosses an IB router, so a switch port cabled to a
 *   router reads as uncabled. A warning says how many were dropped.
 * - Grouped output (ibnetdiscover -g) is accepted: "Chassis", "Non-Chassis
 *   Nodes" and "Hostname:" lines are skipped, "[ext N]" suffixes ignored.
 * - A node's GUID comes from its switchguid/caguid/rtguid line or, without
 *   one, from an id of the form "S-<hex>"/"H-<hex>"/"R-<hex>"; if both are
 *   there they must agree. Port GUIDs, LIDs, widths and speeds are not kept.
 */
#include "aggmgr_topo_int.h"
#include "agg/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_FOUND_MAX 48  /* longest excerpt quoted in an error */

agg_status_t __attribute__((format(printf, 5, 6)))
aggmgr__topo_fail(topo_parser_t *p, int line, const char *found, size_t found_len,
                  const char *fmt, ...)
{
    char expected[320];
    va_list ap;
    size_t n;

    va_start(ap, fmt);
    vsnprintf(expected, sizeof(expected), fmt, ap);
    va_end(ap);
    while (found != NULL && found_len > 0 &&
           (found[found_len - 1] == ' ' || found[found_len - 1] == '\t')) {
        found_len--;
    }
    if (found == NULL) {
        agg_errf(p->err, p->errlen, "%s:%d: expected %s, found end of file",
                  p->name, line, expected);
    } else if (found_len == 0) {
        agg_errf(p->err, p->errlen, "%s:%d: expected %s, found end of line",
                  p->name, line, expected);
    } else {
        n = found_len > TOPO_FOUND_MAX ? TOPO_FOUND_MAX : found_len;
        agg_errf(p->err, p->errlen, "%s:%d: expected %s, found '%.*s%s'",
                  p->name, line, expected, (int)n, found,
                  n < found_len ? "..." : "");
    }
    return AGG_ERR_PARSE;
}

/* ---- the id table --------------------------------------------------------- */

static size_t topo_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

    while (n-- > 0) {
        h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
    }
    return (size_t)h;
}

static int topo_bucket_grow(topo_parser_t *p)
{
    size_t nb = p->num_buckets ? 2 * p->num_buckets : 256;
    int *b    = malloc(nb * sizeof(*b));
    size_t h;
    int i;

    if (b == NULL) {
        return 0;
    }
    memset(b, 0xff, nb * sizeof(*b));
    for (i = 0; i < p->num_slots; i++) {
        h = topo_hash(p->slots[i].id, strlen(p->slots[i].id)) & (nb - 1);
        while (b[h] >= 0) {
            h = (h + 1) & (nb - 1);
        }
        b[h] = i;
    }
    free(p->bucket);
    p->bucket      = b;
    p->num_buckets = nb;
    return 1;
}

int aggmgr__topo_slot(topo_parser_t *p, const char *id, size_t len)
{
    topo_slot_t *s;
    size_t h;

    if ((size_t)(p->num_slots + 1) * 2 > p->num_buckets && !topo_bucket_grow(p)) {
        return -1;
    }
    h = topo_hash(id, len) & (p->num_buckets - 1);
    for (; p->bucket[h] >= 0; h = (h + 1) & (p->num_buckets - 1)) {
        s = &p->slots[p->bucket[h]];
        if (strncmp(s->id, id, len) == 0 && s->id[len] == '\0') {
            return p->bucket[h];
        }
    }
    if (p->num_slots == p->cap_slots) {
        int cap = p->cap_slots ? 2 * p->cap_slots : 128;

        s = realloc(p->slots, (size_t)cap * sizeof(*s));
        if (s == NULL) {
            return -1;
        }
        p->slots     = s;
        p->cap_slots = cap;
    }
    s = &p->slots[p->num_slots];
    memcpy(s->id, id, len);
    s->id[len]  = '\0';
    s->node     = -1;
    p->bucket[h] = p->num_slots;
    return p->num_slots++;
}

/* ---- after the last line -------------------------------------------------- */

static agg_status_t topo_check_links(topo_parser_t *p)
{
    char found[96];
    const topo_pnode_t *a, *b;
    const topo_decl_t *d, *back;
    const char *back_id;
    int i, port, bi;

    for (i = 0; i < p->num_nodes; i++) {
        a = &p->nodes[i];
        for (port = 1; port <= a->node.num_ports; port++) {
            d = &a->decl[port];
            if (d->line == 0) {
                continue;
            }
            snprintf(found, sizeof(found), "\"%s\"[%d]", p->slots[d->slot].id,
                     d->peer_port);
            bi = p->slots[d->slot].node;
            if (bi < 0) {
                return aggmgr__topo_fail(p, d->line, found, strlen(found),
                                         "a peer declared by a Switch, Ca or Rt line");
            }
            b = &p->nodes[bi];
            if (d->peer_port > b->node.num_ports) {
                return aggmgr__topo_fail(p, d->line, found, strlen(found),
                                         "a port in 1..%d of \"%s\" (line %d)",
                                         b->node.num_ports, b->node.id, b->node.src_line);
            }
            if (bi == i && d->peer_port == port) {
                return aggmgr__topo_fail(p, d->line, found, strlen(found),
                                         "a peer other than the port itself");
            }
            back = &b->decl[d->peer_port];
            if (back->line == 0) {
                return aggmgr__topo_fail(p, d->line, found, strlen(found),
                                         "\"%s\" (line %d) to declare its port %d back to "
                                         "\"%s\"[%d]",
                                         b->node.id, b->node.src_line, d->peer_port,
                                         a->node.id, port);
            }
            if (p->slots[back->slot].node == i && back->peer_port == port) {
                continue;
            }
            /* The two ends disagree: blame the later line, quoting the earlier. */
            back_id = p->slots[back->slot].id;
            if (back->line > d->line) {
                snprintf(found, sizeof(found), "\"%s\"[%d]", back_id,
                         back->peer_port);
                return aggmgr__topo_fail(p, back->line, found, strlen(found),
                                         "\"%s\"[%d] as line %d says", a->node.id, port,
                                         d->line);
            }
            return aggmgr__topo_fail(p, d->line, found, strlen(found),
                                     "a port free for \"%s\"[%d], but line %d cables "
                                     "\"%s\"[%d] to \"%s\"[%d]",
                                     a->node.id, port, back->line, b->node.id,
                                     d->peer_port, back_id, back->peer_port);
        }
    }
    return AGG_OK;
}

typedef struct topo_guid_ent {
    uint64_t guid;
    int      node;
} topo_guid_ent_t;

static int topo_guid_cmp(const void *a, const void *b)
{
    const topo_guid_ent_t *x = a, *y = b;

    if (x->guid != y->guid) {
        return x->guid < y->guid ? -1 : 1;
    }
    return x->node - y->node;
}

static agg_status_t topo_check_guids(topo_parser_t *p)
{
    topo_guid_ent_t *ent;
    const aggmgr_node_t *a, *b;
    char found[80];
    agg_status_t status = AGG_OK;
    int i;

    if (p->num_nodes <= 0) {
        return AGG_OK;
    }
    ent = malloc((size_t)p->num_nodes * sizeof(*ent));
    if (ent == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < p->num_nodes; i++) {
        ent[i].guid = p->nodes[i].node.guid;
        ent[i].node = i;
    }
    qsort(ent, (size_t)p->num_nodes, sizeof(*ent), topo_guid_cmp);
    for (i = 1; i < p->num_nodes; i++) {
        if (ent[i].guid == ent[i - 1].guid) {
            a      = &p->nodes[ent[i - 1].node].node;
            b      = &p->nodes[ent[i].node].node;
            snprintf(found, sizeof(found), "\"%s\"", b->id);
            status = aggmgr__topo_fail(p, b->src_line, found, strlen(found),
                                       "a unique GUID (0x%016" PRIx64 " is \"%s\" of line %d)",
                                       a->guid, a->id, a->src_line);
            break;
        }
    }
    free(ent);
    return status;
}

/* Moves the parsed nodes, routers left out, into topo. */
static agg_status_t topo_build(topo_parser_t *p, aggmgr_topo_t *topo)
{
    const topo_pnode_t *pn;
    aggmgr_node_t *n;
    int *newidx;
    int i, k, port, peer, num_routers = 0;

    newidx = malloc(((size_t)p->num_nodes + 1) * sizeof(*newidx));
    if (newidx == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    for (i = 0; i < p->num_nodes; i++) {
        if (p->nodes[i].node.type == TOPO_ROUTER) {
            newidx[i] = -1;
            num_routers++;
            continue;
        }
        newidx[i] = topo->num_nodes++;
        topo->num_switches += p->nodes[i].node.type == AGGMGR_NODE_SWITCH;
        topo->num_cas += p->nodes[i].node.type == AGGMGR_NODE_CA;
    }
    topo->nodes     = calloc((size_t)topo->num_nodes + 1, sizeof(*topo->nodes));
    topo->cas       = calloc((size_t)topo->num_cas + 1, sizeof(*topo->cas));
    topo->ca_switch = calloc((size_t)topo->num_cas + 1, sizeof(*topo->ca_switch));
    if (topo->nodes == NULL || topo->cas == NULL || topo->ca_switch == NULL) {
        goto err_nomem;
    }
    for (i = 0, k = 0; i < p->num_nodes; i++) {
        pn = &p->nodes[i];
        if (newidx[i] < 0) {
            continue;
        }
        n        = &topo->nodes[newidx[i]];
        *n       = pn->node;
        n->ports = calloc((size_t)n->num_ports + 1, sizeof(*n->ports));
        if (n->ports == NULL) {
            goto err_nomem;
        }
        for (port = 0; port <= n->num_ports; port++) {
            n->ports[port].peer_node = -1;
            if (port == 0 || pn->decl[port].line == 0) {
                continue;
            }
            peer = newidx[p->slots[pn->decl[port].slot].node]; /* -1: a router */
            if (peer >= 0) {
                n->ports[port].peer_node = peer;
                n->ports[port].peer_port = pn->decl[port].peer_port;
            }
        }
        if (n->type == AGGMGR_NODE_CA) {
            topo->cas[k++] = newidx[i];
        }
    }
    /* A CA's switch is the one on its lowest port cabled to a switch. */
    for (k = 0; k < topo->num_cas; k++) {
        n                  = &topo->nodes[topo->cas[k]];
        topo->ca_switch[k] = -1;
        for (port = 1; port <= n->num_ports; port++) {
            peer = n->ports[port].peer_node;
            if (peer >= 0 && topo->nodes[peer].type == AGGMGR_NODE_SWITCH) {
                topo->ca_switch[k] = peer;
                break;
            }
        }
    }
    if (num_routers > 0) {
        agg_warn("%s: dropped %d router(s): aggregation trees do not cross routers",
                 p->name, num_routers);
    }
    free(newidx);
    return AGG_OK;

err_nomem:
    free(newidx);
    return AGG_ERR_NO_MEMORY;
}

static void topo_parser_free(topo_parser_t *p)
{
    int i;

    for (i = 0; i < p->num_nodes; i++) {
        free(p->nodes[i].decl);
    }
    free(p->nodes);
    free(p->slots);
    free(p->bucket);
}

agg_status_t aggmgr_topo_parse(const char *text, const char *name,
                               aggmgr_topo_t *topo, char *err, size_t errlen)
{
    topo_parser_t p;
    aggmgr_topo_t t;
    const char *s, *eol, *end;
    agg_status_t status = AGG_OK;
    int line            = 0;

    if (text == NULL || topo == NULL) {
        agg_errf(err, errlen, "%s: no text or no topology", name ? name : "?");
        return AGG_ERR_INVALID_PARAM;
    }
    memset(&p, 0, sizeof(p));
    memset(&t, 0, sizeof(t));
    p.name      = name ? name : "<string>";
    p.err       = err;
    p.errlen    = errlen;
    p.cur       = -1;
    p.guid_type = -1;
    for (s = text; *s != '\0' && status == AGG_OK; s = *eol ? eol + 1 : eol) {
        eol = strchr(s, '\n');
        if (eol == NULL) {
            eol = s + strlen(s);
        }
        end = (eol > s && eol[-1] == '\r') ? eol - 1 : eol;
        status = aggmgr__topo_parse_line(&p, s, end, ++line);
    }
    if (status == AGG_OK && p.guid_type >= 0) {
        status = aggmgr__topo_fail(&p, p.guid_line, NULL, 0, "a %s line after this line",
                                   aggmgr__topo_type_name(p.guid_type));
    }
    if (status == AGG_OK) {
        status = topo_check_links(&p);
    }
    if (status == AGG_OK) {
        status = topo_check_guids(&p);
    }
    if (status == AGG_OK) {
        status = topo_build(&p, &t);
    }
    /* After the build, which drops routers: a file of routers alone is no fabric. */
    if (status == AGG_OK && t.num_nodes == 0) {
        status = aggmgr__topo_fail(&p, line > 0 ? line : 1, NULL, 0,
                                   "at least one Switch or Ca line");
    }
    topo_parser_free(&p);
    if (status != AGG_OK) {
        if (status == AGG_ERR_NO_MEMORY) {
            agg_errf(err, errlen, "%s: out of memory", p.name);
        }
        aggmgr_topo_free(&t);
        return status;
    }
    snprintf(t.source, sizeof(t.source), "%s", p.name);
    *topo = t;
    return AGG_OK;
}

agg_status_t aggmgr_topo_load(const char *path, aggmgr_topo_t *topo, char *err,
                              size_t errlen)
{
    char *buf = NULL, *nbuf;
    const char *nul;
    size_t len = 0, cap = 0, got;
    agg_status_t status;
    FILE *f;
    int line = 1;

    if (path == NULL || topo == NULL) {
        agg_errf(err, errlen, "no topology file given");
        return AGG_ERR_INVALID_PARAM;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        agg_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return AGG_ERR_IO;
    }
    do {
        if (cap - len < 4096) {
            cap  = cap ? 2 * cap : 65536;
            nbuf = realloc(buf, cap + 1);
            if (nbuf == NULL) {
                agg_errf(err, errlen, "%s: out of memory", path);
                status = AGG_ERR_NO_MEMORY;
                goto err_free;
            }
            buf = nbuf;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    if (ferror(f)) {
        agg_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        status = AGG_ERR_IO;
        goto err_free;
    }
    buf[len] = '\0';
    nul      = memchr(buf, '\0', len);
    if (nul != NULL) {
        for (const char *s = buf; s < nul; s++) {
            line += *s == '\n';
        }
        agg_errf(err, errlen, "%s:%d: expected text, found a NUL byte", path, line);
        status = AGG_ERR_PARSE;
        goto err_free;
    }
    fclose(f);
    status = aggmgr_topo_parse(buf, path, topo, err, errlen);
    free(buf);
    return status;

err_free:
    free(buf);
    fclose(f);
    return status;
}
