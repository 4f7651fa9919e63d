/*
 * The fabric as aggmgr knows it: switches and channel adapters (HCAs) with
 * their cabled ports. Loaded from ibnetdiscover output or generated.
 */
#ifndef AGGMGR_TOPO_H
#define AGGMGR_TOPO_H

#include <stdint.h>
#include <stdio.h>
#include "agg/status.h"

typedef enum aggmgr_node_type {
    AGGMGR_NODE_SWITCH = 1,
    AGGMGR_NODE_CA     = 2,
} aggmgr_node_type_t;

typedef struct aggmgr_port {
    int peer_node;  /* index into topo->nodes, -1 when the port is not cabled */
    int peer_port;  /* port number on the peer */
} aggmgr_port_t;

typedef struct aggmgr_node {
    aggmgr_node_type_t type;
    uint64_t           guid;      /* switchguid / caguid */
    char               id[64];    /* ibnetdiscover id, e.g. "S-0002c90300000001" */
    char               desc[128]; /* node description, e.g. "host1 mlx5_0" */
    int                num_ports;
    aggmgr_port_t     *ports;     /* ports[p] for p in 1..num_ports; [0] unused */
    int                src_line;  /* line of the node's header in the file, 0 if generated */
} aggmgr_node_t;

typedef struct aggmgr_topo {
    aggmgr_node_t *nodes;
    int            num_nodes;
    int            num_switches;
    int            num_cas;
    int           *cas;       /* node indices of the CAs, in file (or generated) order */
    int           *ca_switch; /* per entry of cas[]: node index of the switch it is cabled to, -1 none */
    char           source[256]; /* file path or "fat-tree L:S:H" */
} aggmgr_topo_t;

/*
 * Parses ibnetdiscover output. On error returns AGG_ERR_PARSE (or
 * AGG_ERR_IO) and writes "PATH:LINE: what was expected, what was found"
 * into err. Links must be consistent (both ends agree) and reference
 * declared nodes.
 */
agg_status_t aggmgr_topo_load(const char *path, aggmgr_topo_t *topo, char *err,
                              size_t errlen);

/* Same as aggmgr_topo_load, from a string; `name` is used in messages. */
agg_status_t aggmgr_topo_parse(const char *text, const char *name,
                               aggmgr_topo_t *topo, char *err, size_t errlen);

/*
 * A two-level fat tree: `leaves` leaf switches each cabled to every one of
 * `spines` spine switches, and `hosts_per_leaf` CAs under each leaf. CAs are
 * ordered leaf by leaf. GUIDs are deterministic.
 */
agg_status_t aggmgr_topo_fat_tree(int leaves, int spines, int hosts_per_leaf,
                                  aggmgr_topo_t *topo);

/* Writes the topology in ibnetdiscover format (aggmgr_topo_load reads it back). */
int aggmgr_topo_write(const aggmgr_topo_t *topo, FILE *out);

/* Node index by GUID, -1 if none. */
int aggmgr_topo_find_guid(const aggmgr_topo_t *topo, uint64_t guid);

void aggmgr_topo_free(aggmgr_topo_t *topo);

#endif
