/*
 * One line of ibnetdiscover output: a node header ("Switch", "Ca", "Rt"), a
 * port line, or a key=value line such as "switchguid=". What a line declares
 * goes into the parser; whether the declarations agree with each other is
 * checked after the last line (aggmgr_topo_ibnd.c).
 */
#include "aggmgr_topo_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct topo_cur {
    const char *s;   /* next character */
    const char *end; /* end of the line, exclusive */
} topo_cur_t;

static agg_status_t topo_fail_at(topo_parser_t *p, int line, const topo_cur_t *c,
                                 const char *expected)
{
    return aggmgr__topo_fail(p, line, c->s, (size_t)(c->end - c->s), "%s", expected);
}

const char *aggmgr__topo_type_name(int type)
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
        return aggmgr__topo_fail(p, line, id - 1, len + 2,
                                 "an id starting with \"%c-\" on a %s line", letter[type],
                                 aggmgr__topo_type_name(type));
    }
    if (p->guid_type >= 0 && p->guid_type != type) {
        return aggmgr__topo_fail(p, line, idc->s, (size_t)(idc->end - idc->s),
                                 "a %s line after the %s= line %d",
                                 aggmgr__topo_type_name(p->guid_type),
                                 topo_guid_key(p->guid_type), p->guid_line);
    }
    if (p->guid_type >= 0) {
        if (has_id_guid && id_guid != p->guid) {
            return aggmgr__topo_fail(p, line, id - 1, len + 2,
                                     "an id matching GUID 0x%016" PRIx64 " of line %d",
                                     p->guid, p->guid_line);
        }
        *guid = p->guid;
    } else if (has_id_guid) {
        *guid = id_guid;
    } else {
        return aggmgr__topo_fail(p, line, id - 1, len + 2,
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
    slot = aggmgr__topo_slot(p, id, len);
    if (slot < 0) {
        return AGG_ERR_NO_MEMORY;
    }
    if (p->slots[slot].node >= 0) {
        return aggmgr__topo_fail(p, line, id - 1, len + 2,
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
        return aggmgr__topo_fail(p, line, t.s, (size_t)(c->s - t.s),
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
        return aggmgr__topo_fail(p, line, start.s, (size_t)(start.end - start.s),
                                 "one line per port (port %d of \"%s\" is on line %d)",
                                 port, n->node.id, d->line);
    }
    slot = aggmgr__topo_slot(p, id, len);
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
            return aggmgr__topo_fail(p, line, start.s, (size_t)(start.end - start.s),
                                     "a %s line for the GUID of line %d",
                                     aggmgr__topo_type_name(p->guid_type), p->guid_line);
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

agg_status_t aggmgr__topo_parse_line(topo_parser_t *p, const char *s, const char *end,
                                     int line)
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
