/*
 * The fabric: an ibnetdiscover reader, a two-level fat-tree generator and a
 * writer whose output the reader takes back unchanged.
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
#include "aggmgr_topo.h"
#include "agg/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define TOPO_MAX_PORTS 255 /* port numbers are 8 bits on the wire */
#define TOPO_ROUTER    0   /* parse-time type of an Rt block, never kept */
#define TOPO_FOUND_MAX 48  /* longest excerpt quoted in an error */

/* Generated fabrics: switch n (1-based, spines first) and CA h (1-based). CA
 * GUIDs are 16 apart so that the port GUIDs written (node GUID + port) never
 * collide with another node's GUID. */
#define TOPO_FT_SWITCH_GUID 0x0002c90300000000ull
#define TOPO_FT_CA_GUID     0x0002c90300100000ull

typedef struct topo_decl {
    int slot;      /* peer id, index into the id table */
    int peer_port;
    int line;      /* 0: no port line for this port */
} topo_decl_t;

typedef struct topo_pnode {
    aggmgr_node_t node; /* type TOPO_ROUTER for an Rt block; ports unset */
    topo_decl_t  *decl; /* [num_ports + 1] */
} topo_pnode_t;

typedef struct topo_slot {
    char id[64];
    int  node; /* index into the parser's nodes, -1 while only referenced */
} topo_slot_t;

typedef struct topo_parser {
    const char   *name;
    char         *err;
    size_t        errlen;
    topo_pnode_t *nodes;
    int           num_nodes, cap_nodes;
    topo_slot_t  *slots;
    int           num_slots, cap_slots;
    int          *bucket;      /* open addressing over slots, -1 empty */
    size_t        num_buckets; /* a power of two, at least 2 * num_slots */
    int           cur;         /* node whose port lines follow, -1 none */
    int           guid_type;   /* type named by a pending *guid= line, -1 none */
    uint64_t      guid;
    int           guid_line;
} topo_parser_t;

typedef struct topo_cur {
    const char *s;   /* next character */
    const char *end; /* end of the line, exclusive */
} topo_cur_t;

static void __attribute__((format(printf, 3, 4)))
topo_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* "NAME:LINE: expected <fmt>, found '<found>'"; found NULL means end of file. */
static agg_status_t __attribute__((format(printf, 5, 6)))
topo_fail(topo_parser_t *p, int line, const char *found, size_t found_len,
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
        topo_errf(p->err, p->errlen, "%s:%d: expected %s, found end of file",
                  p->name, line, expected);
    } else if (found_len == 0) {
        topo_errf(p->err, p->errlen, "%s:%d: expected %s, found end of line",
                  p->name, line, expected);
    } else {
        n = found_len > TOPO_FOUND_MAX ? TOPO_FOUND_MAX : found_len;
        topo_errf(p->err, p->errlen, "%s:%d: expected %s, found '%.*s%s'",
                  p->name, line, expected, (int)n, found,
                  n < found_len ? "..." : "");
    }
    return AGG_ERR_PARSE;
}

static agg_status_t topo_fail_at(topo_parser_t *p, int line, const topo_cur_t *c,
                                 const char *expected)
{
    return topo_fail(p, line, c->s, (size_t)(c->end - c->s), "%s", expected);
}

static const char *topo_type_name(int type)
{
    return type == AGGMGR_NODE_SWITCH ? "Switch" :
           type == AGGMGR_NODE_CA     ? "Ca" : "Rt";
}

static const char *topo_guid_key(int type)
{
    return type == AGGMGR_NODE_SWITCH ? "switchguid" :
           type == AGGMGR_NODE_CA     ? "caguid" : "rtguid";
}

/* ---- scanning one line -------------------------------------------------- */

static int topo_skip_ws(topo_cur_t *c)
{
    const char *s = c->s;

    while (c->s < c->end && (*c->s == ' ' || *c->s == '\t')) {
        c->s++;
    }
    return c->s != s;
}

static int topo_accept(topo_cur_t *c, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(c->end - c->s) < n || memcmp(c->s, word, n) != 0) {
        return 0;
    }
    c->s += n;
    return 1;
}

static int topo_at_end(topo_cur_t *c)
{
    topo_skip_ws(c);
    return c->s == c->end || *c->s == '#';
}

static int topo_hexval(char ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

/* 1 to 16 hex digits, an optional 0x first. */
static int topo_hex(topo_cur_t *c, uint64_t *val)
{
    topo_cur_t t = *c;
    uint64_t v   = 0;
    int digits   = 0;

    if (!topo_accept(&t, "0x")) {
        topo_accept(&t, "0X");
    }
    for (; t.s < t.end && topo_hexval(*t.s) >= 0; t.s++, digits++) {
        v = (v << 4) | (uint64_t)topo_hexval(*t.s);
    }
    if (digits == 0 || digits > 16) {
        return 0;
    }
    *c   = t;
    *val = v;
    return 1;
}

static int topo_uint(topo_cur_t *c, int max, int *val)
{
    long v = 0;
    const char *s = c->s;

    for (; c->s < c->end && *c->s >= '0' && *c->s <= '9'; c->s++) {
        v = v * 10 + (*c->s - '0');
        if (v > max) {
            v = max + 1L; /* keep consuming, report out of range */
        }
    }
    *val = (int)v;
    return c->s != s;
}

/* "[N]", N in 0..TOPO_MAX_PORTS + 1 (the caller checks the range). */
static int topo_port(topo_cur_t *c, int *port)
{
    topo_cur_t t = *c;

    if (!topo_accept(&t, "[") || !topo_uint(&t, TOPO_MAX_PORTS, port) ||
        !topo_accept(&t, "]")) {
        return 0;
    }
    *c = t;
    return 1;
}

/* An optional "[ext N]" (external port label of grouped output). */
static int topo_skip_ext(topo_cur_t *c)
{
    topo_cur_t t = *c;
    int n;

    if (!topo_accept(&t, "[ext")) {
        return 1;
    }
    topo_skip_ws(&t);
    if (!topo_uint(&t, 1 << 20, &n) || !topo_accept(&t, "]")) {
        return 0;
    }
    *c = t;
    return 1;
}

/* An optional "(portguid)". */
static int topo_skip_guid(topo_cur_t *c)
{
    uint64_t guid;

    topo_skip_ws(c);
    if (!topo_accept(c, "(")) {
        return 1;
    }
    if (!topo_hex(c, &guid) || !topo_accept(c, ")")) {
        return 0;
    }
    topo_skip_ws(c);
    return 1;
}

/* A quoted id of 1..63 characters. */
static int topo_quoted_id(topo_cur_t *c, const char **id, size_t *len)
{
    const char *q;

    if (c->s == c->end || *c->s != '"') {
        return 0;
    }
    q = memchr(c->s + 1, '"', (size_t)(c->end - c->s - 1));
    if (q == NULL || q == c->s + 1 || q - c->s - 1 >= 64) {
        return 0;
    }
    *id  = c->s + 1;
    *len = (size_t)(q - c->s - 1);
    c->s = q + 1;
    return 1;
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

/* The slot of `id`, created if new; -1 when out of memory. */
static int topo_slot(topo_parser_t *p, const char *id, size_t len)
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

/* ---- lines ---------------------------------------------------------------- */

static agg_status_t topo_node_guid(topo_parser_t *p, topo_cur_t *idc, int line,
                                   int type, const char *id, size_t len,
                                   uint64_t *guid)
{
    static const char letter[] = {'R', 'S', 'H'}; /* by type */
    topo_cur_t t = {id + 2, id + len};
    uint64_t id_guid;
    int has_id_guid;

    has_id_guid = len > 2 && id[1] == '-' &&
                  (id[0] == 'S' || id[0] == 'H' || id[0] == 'R') &&
                  topo_hex(&t, &id_guid) && t.s == t.end;
    if (has_id_guid && id[0] != letter[type]) {
        return topo_fail(p, line, id - 1, len + 2,
                         "an id starting with \"%c-\" on a %s line", letter[type],
                         topo_type_name(type));
    }
    if (p->guid_type >= 0 && p->guid_type != type) {
        return topo_fail(p, line, idc->s, (size_t)(idc->end - idc->s),
                         "a %s line after the %s= line %d",
                         topo_type_name(p->guid_type),
                         topo_guid_key(p->guid_type), p->guid_line);
    }
    if (p->guid_type >= 0) {
        if (has_id_guid && id_guid != p->guid) {
            return topo_fail(p, line, id - 1, len + 2,
                             "an id matching GUID 0x%016" PRIx64 " of line %d",
                             p->guid, p->guid_line);
        }
        *guid = p->guid;
    } else if (has_id_guid) {
        *guid = id_guid;
    } else {
        return topo_fail(p, line, id - 1, len + 2,
                         "a %s= line before this node or an id \"%c-<hex>\"",
                         topo_guid_key(type), letter[type]);
    }
    p->guid_type = -1;
    return AGG_OK;
}

/* "Switch 36 "S-..."  # "desc" ...", "Ca 1 "H-..." # "desc"", "Rt ..." */
static agg_status_t topo_parse_header(topo_parser_t *p, topo_cur_t *c, int line,
                                      int type)
{
    topo_cur_t idc, numc;
    topo_pnode_t *n;
    const char *id, *q;
    size_t len;
    uint64_t guid = 0;
    agg_status_t status;
    int num_ports, slot;

    topo_skip_ws(c);
    numc = *c;
    if (!topo_uint(c, TOPO_MAX_PORTS, &num_ports) || num_ports < 1 ||
        num_ports > TOPO_MAX_PORTS) {
        return topo_fail_at(p, line, &numc, "a port count in 1..255");
    }
    topo_skip_ws(c);
    idc = *c;
    if (!topo_quoted_id(c, &id, &len)) {
        return topo_fail_at(p, line, c, "a quoted node id of 1..63 characters");
    }
    if (!topo_at_end(c)) {
        return topo_fail_at(p, line, c, "'#' and the node description");
    }
    status = topo_node_guid(p, &idc, line, type, id, len, &guid);
    if (status != AGG_OK) {
        return status;
    }
    slot = topo_slot(p, id, len);
    if (slot < 0) {
        return AGG_ERR_NO_MEMORY;
    }
    if (p->slots[slot].node >= 0) {
        return topo_fail(p, line, id - 1, len + 2,
                         "a unique node id (line %d declares it already)",
                         p->nodes[p->slots[slot].node].node.src_line);
    }
    if (p->num_nodes == p->cap_nodes) {
        int cap = p->cap_nodes ? 2 * p->cap_nodes : 64;

        n = realloc(p->nodes, (size_t)cap * sizeof(*n));
        if (n == NULL) {
            return AGG_ERR_NO_MEMORY;
        }
        p->nodes     = n;
        p->cap_nodes = cap;
    }
    n = &p->nodes[p->num_nodes];
    memset(n, 0, sizeof(*n));
    n->decl = calloc((size_t)num_ports + 1, sizeof(*n->decl));
    if (n->decl == NULL) {
        return AGG_ERR_NO_MEMORY;
    }
    n->node.type      = (aggmgr_node_type_t)type;
    n->node.guid      = guid;
    n->node.num_ports = num_ports;
    n->node.src_line  = line;
    memcpy(n->node.id, id, len);
    /* The description is the quoted text after '#': up to the last quote, so
     * a description holding quotes survives; longer ones are truncated. */
    if (c->s < c->end) {
        c->s++;
        topo_skip_ws(c);
        q = c->end;
        while (q > c->s + 1 && q[-1] != '"') {
            q--;
        }
        if (c->s < c->end && *c->s == '"' && q > c->s + 1) {
            snprintf(n->node.desc, sizeof(n->node.desc), "%.*s",
                     (int)(q - c->s - 2), c->s + 1);
        }
    }
    p->slots[slot].node = p->num_nodes;
    p->cur              = p->num_nodes++;
    return AGG_OK;
}

/* "[1](portguid) \t"S-..."[3][ext 7](portguid) \t# ..." */
static agg_status_t topo_parse_port(topo_parser_t *p, topo_cur_t *c, int line)
{
    const topo_cur_t start = *c;
    topo_cur_t t;
    topo_pnode_t *n;
    topo_decl_t *d;
    const char *id;
    size_t len;
    int port, peer_port, slot;

    if (p->cur < 0) {
        return topo_fail_at(p, line, c, "a Switch, Ca or Rt line before port lines");
    }
    n = &p->nodes[p->cur];
    t = *c;
    if (!topo_port(c, &port)) {
        return topo_fail_at(p, line, c, "a port number in brackets");
    }
    if (port < 1 || port > n->node.num_ports) {
        return topo_fail(p, line, t.s, (size_t)(c->s - t.s),
                         "a port in 1..%d of \"%s\" (line %d)", n->node.num_ports,
                         n->node.id, n->node.src_line);
    }
    if (!topo_skip_ext(c) || !topo_skip_guid(c)) {
        return topo_fail_at(p, line, c, "\"[ext N]\" or a port GUID in parentheses");
    }
    if (!topo_quoted_id(c, &id, &len)) {
        return topo_fail_at(p, line, c, "a quoted peer id of 1..63 characters");
    }
    if (!topo_port(c, &peer_port) || peer_port < 1 || peer_port > TOPO_MAX_PORTS) {
        return topo_fail_at(p, line, c, "a peer port number in 1..255 in brackets");
    }
    if (!topo_skip_ext(c) || !topo_skip_guid(c)) {
        return topo_fail_at(p, line, c, "\"[ext N]\" or a port GUID in parentheses");
    }
    if (!topo_at_end(c)) {
        return topo_fail_at(p, line, c, "'#' or the end of the port line");
    }
    d = &n->decl[port];
    if (d->line != 0) {
        return topo_fail(p, line, start.s, (size_t)(start.end - start.s),
                         "one line per port (port %d of \"%s\" is on line %d)",
                         port, n->node.id, d->line);
    }
    slot = topo_slot(p, id, len);
    if (slot < 0) {
        return AGG_ERR_NO_MEMORY;
    }
    d->slot      = slot;
    d->peer_port = peer_port;
    d->line      = line;
    return AGG_OK;
}

/* "switchguid=0x...(portguid)", "vendid=0x2c9", ..., with optional comment. */
static agg_status_t topo_parse_keyval(topo_parser_t *p, topo_cur_t *c, int line)
{
    static const struct {
        const char *key;
        int         guid_type; /* -1: a value that is only checked */
    } keys[] = {
        {"vendid=", -1},
        {"devid=", -1},
        {"sysimgguid=", -1},
        {"switchguid=", AGGMGR_NODE_SWITCH},
        {"caguid=", AGGMGR_NODE_CA},
        {"rtguid=", TOPO_ROUTER},
    };
    const topo_cur_t start = *c;
    uint64_t val;
    size_t i;

    p->cur = -1; /* port lines belong right after their node line */
    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (topo_accept(c, keys[i].key)) {
            break;
        }
    }
    if (i == sizeof(keys) / sizeof(keys[0])) {
        return topo_fail_at(p, line, c,
                            "vendid=, devid=, sysimgguid=, switchguid=, caguid= "
                            "or rtguid=");
    }
    if (!topo_hex(c, &val)) {
        return topo_fail_at(p, line, c, "a hexadecimal value");
    }
    if (keys[i].guid_type >= 0) {
        if (p->guid_type >= 0) {
            return topo_fail(p, line, start.s, (size_t)(start.end - start.s),
                             "a %s line for the GUID of line %d",
                             topo_type_name(p->guid_type), p->guid_line);
        }
        if (!topo_skip_guid(c)) {
            return topo_fail_at(p, line, c, "a port GUID in parentheses");
        }
        p->guid_type = keys[i].guid_type;
        p->guid      = val;
        p->guid_line = line;
    }
    if (!topo_at_end(c)) {
        return topo_fail_at(p, line, c, "'#' or the end of the line");
    }
    return AGG_OK;
}

static agg_status_t topo_parse_line(topo_parser_t *p, const char *s,
                                    const char *end, int line)
{
    static const struct {
        const char *word;
        int         type;
    } heads[] = {
        {"Switch", AGGMGR_NODE_SWITCH},
        {"Ca", AGGMGR_NODE_CA},
        {"Rt", TOPO_ROUTER},
    };
    topo_cur_t c = {s, end};
    topo_cur_t w;
    size_t i;

    if (topo_at_end(&c)) {
        return AGG_OK; /* blank or comment */
    }
    if (*c.s == '[') {
        return topo_parse_port(p, &c, line);
    }
    for (i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        w = c;
        if (topo_accept(&w, heads[i].word) && w.s < w.end &&
            (*w.s == ' ' || *w.s == '\t')) {
            return topo_parse_header(p, &w, line, heads[i].type);
        }
    }
    /* Lines of grouped output that carry nothing we keep. */
    w = c;
    if ((topo_accept(&w, "Chassis") && topo_skip_ws(&w) && w.s < w.end &&
         *w.s >= '0' && *w.s <= '9') ||
        topo_accept(&w, "Non-Chassis Nodes") || topo_accept(&w, "Hostname:")) {
        p->cur = -1;
        return AGG_OK;
    }
    for (w = c; w.s < w.end && *w.s != ' ' && *w.s != '\t' && *w.s != '='; w.s++) {
    }
    if (w.s < w.end && *w.s == '=') {
        return topo_parse_keyval(p, &c, line);
    }
    return topo_fail_at(p, line, &c,
                        "a Switch, Ca or Rt line, a port line or a key=value line");
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
                return topo_fail(p, d->line, found, strlen(found),
                                 "a peer declared by a Switch, Ca or Rt line");
            }
            b = &p->nodes[bi];
            if (d->peer_port > b->node.num_ports) {
                return topo_fail(p, d->line, found, strlen(found),
                                 "a port in 1..%d of \"%s\" (line %d)",
                                 b->node.num_ports, b->node.id, b->node.src_line);
            }
            if (bi == i && d->peer_port == port) {
                return topo_fail(p, d->line, found, strlen(found),
                                 "a peer other than the port itself");
            }
            back = &b->decl[d->peer_port];
            if (back->line == 0) {
                return topo_fail(p, d->line, found, strlen(found),
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
                return topo_fail(p, back->line, found, strlen(found),
                                 "\"%s\"[%d] as line %d says", a->node.id, port,
                                 d->line);
            }
            return topo_fail(p, d->line, found, strlen(found),
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
            status = topo_fail(p, b->src_line, found, strlen(found),
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
        topo_errf(err, errlen, "%s: no text or no topology", name ? name : "?");
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
        status = topo_parse_line(&p, s, end, ++line);
    }
    if (status == AGG_OK && p.guid_type >= 0) {
        status = topo_fail(&p, p.guid_line, NULL, 0, "a %s line after this line",
                           topo_type_name(p.guid_type));
    }
    if (status == AGG_OK && p.num_nodes == 0) {
        status = topo_fail(&p, line > 0 ? line : 1, NULL, 0,
                           "at least one Switch or Ca line");
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
    topo_parser_free(&p);
    if (status != AGG_OK) {
        if (status == AGG_ERR_NO_MEMORY) {
            topo_errf(err, errlen, "%s: out of memory", p.name);
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
        topo_errf(err, errlen, "no topology file given");
        return AGG_ERR_INVALID_PARAM;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        topo_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return AGG_ERR_IO;
    }
    do {
        if (cap - len < 4096) {
            cap  = cap ? 2 * cap : 65536;
            nbuf = realloc(buf, cap + 1);
            if (nbuf == NULL) {
                topo_errf(err, errlen, "%s: out of memory", path);
                status = AGG_ERR_NO_MEMORY;
                goto err_free;
            }
            buf = nbuf;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    if (ferror(f)) {
        topo_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        status = AGG_ERR_IO;
        goto err_free;
    }
    buf[len] = '\0';
    nul      = memchr(buf, '\0', len);
    if (nul != NULL) {
        for (const char *s = buf; s < nul; s++) {
            line += *s == '\n';
        }
        topo_errf(err, errlen, "%s:%d: expected text, found a NUL byte", path, line);
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

/* ---- generated fabrics ---------------------------------------------------- */

static void topo_ft_cable(aggmgr_topo_t *t, int a, int pa, int b, int pb)
{
    t->nodes[a].ports[pa].peer_node = b;
    t->nodes[a].ports[pa].peer_port = pb;
    t->nodes[b].ports[pb].peer_node = a;
    t->nodes[b].ports[pb].peer_port = pa;
}

agg_status_t aggmgr_topo_fat_tree(int leaves, int spines, int hosts_per_leaf,
                                  aggmgr_topo_t *topo)
{
    aggmgr_topo_t t;
    aggmgr_node_t *n;
    int i, p, l, s, h, leaf, ca;

    if (topo == NULL || leaves < 1 || leaves > TOPO_MAX_PORTS || spines < 0 ||
        hosts_per_leaf < 0 || hosts_per_leaf + spines < 1 ||
        hosts_per_leaf + spines > TOPO_MAX_PORTS ||
        (long)leaves * hosts_per_leaf > 1000000) {
        agg_error("fat tree %d:%d:%d: want 1..255 leaves, hosts per leaf plus "
                  "spines in 1..255", leaves, spines, hosts_per_leaf);
        return AGG_ERR_INVALID_PARAM;
    }
    memset(&t, 0, sizeof(t));
    t.num_switches = leaves + spines;
    t.num_cas      = leaves * hosts_per_leaf;
    t.num_nodes    = t.num_switches + t.num_cas;
    t.nodes        = calloc((size_t)t.num_nodes, sizeof(*t.nodes));
    t.cas          = calloc((size_t)t.num_cas + 1, sizeof(*t.cas));
    t.ca_switch    = calloc((size_t)t.num_cas + 1, sizeof(*t.ca_switch));
    if (t.nodes == NULL || t.cas == NULL || t.ca_switch == NULL) {
        goto err_free;
    }
    /* Nodes: spines, then leaves, then CAs leaf by leaf. */
    for (i = 0; i < t.num_nodes; i++) {
        n = &t.nodes[i];
        if (i < spines) {
            n->type      = AGGMGR_NODE_SWITCH;
            n->num_ports = leaves;
            snprintf(n->desc, sizeof(n->desc), "spine%d", i + 1);
        } else if (i < t.num_switches) {
            n->type      = AGGMGR_NODE_SWITCH;
            n->num_ports = hosts_per_leaf + spines;
            snprintf(n->desc, sizeof(n->desc), "leaf%d", i - spines + 1);
        } else {
            n->type      = AGGMGR_NODE_CA;
            n->num_ports = 1;
            snprintf(n->desc, sizeof(n->desc), "host%d mlx5_0",
                     i - t.num_switches + 1);
        }
        if (n->type == AGGMGR_NODE_SWITCH) {
            n->guid = TOPO_FT_SWITCH_GUID + (uint64_t)i + 1;
            snprintf(n->id, sizeof(n->id), "S-%016" PRIx64, n->guid);
        } else {
            n->guid = TOPO_FT_CA_GUID + 16 * ((uint64_t)(i - t.num_switches) + 1);
            snprintf(n->id, sizeof(n->id), "H-%016" PRIx64, n->guid);
        }
        n->ports = calloc((size_t)n->num_ports + 1, sizeof(*n->ports));
        if (n->ports == NULL) {
            goto err_free;
        }
        for (p = 0; p <= n->num_ports; p++) {
            n->ports[p].peer_node = -1;
        }
    }
    /* Leaf ports 1..hosts go down to CAs, hosts+s up to spine s (port = leaf). */
    for (l = 0; l < leaves; l++) {
        leaf = spines + l;
        for (h = 0; h < hosts_per_leaf; h++) {
            ca = l * hosts_per_leaf + h;
            topo_ft_cable(&t, leaf, h + 1, t.num_switches + ca, 1);
            t.cas[ca]       = t.num_switches + ca;
            t.ca_switch[ca] = leaf;
        }
        for (s = 0; s < spines; s++) {
            topo_ft_cable(&t, leaf, hosts_per_leaf + s + 1, s, l + 1);
        }
    }
    snprintf(t.source, sizeof(t.source), "fat-tree %d:%d:%d", leaves, spines,
             hosts_per_leaf);
    *topo = t;
    return AGG_OK;

err_free:
    agg_error("fat tree %d:%d:%d: out of memory", leaves, spines, hosts_per_leaf);
    aggmgr_topo_free(&t);
    return AGG_ERR_NO_MEMORY;
}

/* ---- writing -------------------------------------------------------------- */

/* Port GUIDs, LIDs and link speeds are not kept. CA port GUIDs are written as
 * node GUID + port number, the usual numbering of HCA ports; LIDs as 0
 * (unassigned) and links as 4xEDR, because ibsim, which reads this format to
 * simulate a fabric, wants a LID and a link type on every port line. */
int aggmgr_topo_write(const aggmgr_topo_t *topo, FILE *out)
{
    const aggmgr_node_t *n, *peer;
    int i, p;

    if (topo == NULL || out == NULL) {
        return AGG_ERR_INVALID_PARAM;
    }
    fprintf(out, "#\n# Topology file: written by aggmgr from %s\n#\n", topo->source);
    for (i = 0; i < topo->num_nodes; i++) {
        n = &topo->nodes[i];
        if (n->type == AGGMGR_NODE_SWITCH) {
            fprintf(out, "\nswitchguid=0x%016" PRIx64 "(%016" PRIx64 ")\n", n->guid,
                    n->guid);
            fprintf(out, "Switch\t%d \"%s\"\t\t# \"%s\" base port 0 lid 0 lmc 0\n",
                    n->num_ports, n->id, n->desc);
        } else {
            fprintf(out, "\ncaguid=0x%016" PRIx64 "\n", n->guid);
            fprintf(out, "Ca\t%d \"%s\"\t\t# \"%s\"\n", n->num_ports, n->id, n->desc);
        }
        for (p = 1; p <= n->num_ports; p++) {
            if (n->ports[p].peer_node < 0) {
                continue;
            }
            peer = &topo->nodes[n->ports[p].peer_node];
            fprintf(out, "[%d]", p);
            if (n->type == AGGMGR_NODE_CA) {
                fprintf(out, "(%016" PRIx64 ") ", n->guid + (uint64_t)p);
            }
            fprintf(out, "\t\"%s\"[%d]", peer->id, n->ports[p].peer_port);
            if (peer->type == AGGMGR_NODE_CA) {
                fprintf(out, "(%016" PRIx64 ") ",
                        peer->guid + (uint64_t)n->ports[p].peer_port);
            }
            fprintf(out, "\t\t# %s\"%s\" lid 0 4xEDR\n",
                    n->type == AGGMGR_NODE_CA ? "lid 0 lmc 0 " : "", peer->desc);
        }
    }
    return ferror(out) ? AGG_ERR_IO : AGG_OK;
}

int aggmgr_topo_find_guid(const aggmgr_topo_t *topo, uint64_t guid)
{
    int i;

    for (i = 0; topo != NULL && i < topo->num_nodes; i++) {
        if (topo->nodes[i].guid == guid) {
            return i;
        }
    }
    return -1;
}

void aggmgr_topo_free(aggmgr_topo_t *topo)
{
    int i;

    if (topo == NULL) {
        return;
    }
    for (i = 0; topo->nodes != NULL && i < topo->num_nodes; i++) {
        free(topo->nodes[i].ports);
    }
    free(topo->nodes);
    free(topo->cas);
    free(topo->ca_switch);
    memset(topo, 0, sizeof(*topo));
}
