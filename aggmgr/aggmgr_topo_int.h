/*
 * What the files of the ibnetdiscover reader share, and the limits the
 * generator shares with it. Nothing outside aggmgr_topo*.c includes this;
 * aggmgr_topo.h is the interface.
 */
#ifndef AGGMGR_TOPO_INT_H
#define AGGMGR_TOPO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "aggmgr_topo.h"

#define TOPO_MAX_PORTS 255 /* port numbers are 8 bits on the wire */
#define TOPO_ROUTER    0   /* parse-time type of an Rt block, never kept */

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

/*
 * Fails the parse: writes "NAME:LINE: expected <fmt>, found '<found>'" into
 * p->err; found NULL means end of file, found_len 0 end of line. Returns
 * AGG_ERR_PARSE.
 */
agg_status_t aggmgr__topo_fail(topo_parser_t *p, int line, const char *found,
                               size_t found_len, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The slot of node id `id` (len characters), created if new; -1 when out of memory. */
int aggmgr__topo_slot(topo_parser_t *p, const char *id, size_t len);

/* Reads line number `line`, [s, end) without its newline, into p. */
agg_status_t aggmgr__topo_parse_line(topo_parser_t *p, const char *s, const char *end,
                                     int line);

/* "Switch", "Ca" or "Rt", as the header line of a node of that type reads. */
const char *aggmgr__topo_type_name(int type);

#endif
