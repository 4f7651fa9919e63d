/*
 * Rank placement: which host adapter (and so which leaf switch) each rank of
 * a job uses. A rank's fragments enter the fabric at its own host's adapter,
 * so where the fabric describes the job's hosts ("node17 mlx5_0" in the
 * adapter's description, as ibnetdiscover prints it), each rank gets an
 * adapter of its host; several ranks of one host share its adapters, in
 * turn. A fabric that names none of them (the built-in fat tree, "host1
 * mlx5_0") is a model rather than the machine: ranks then take free adapters
 * either packed, filling one leaf switch after another, or spread over the
 * leaves, one per leaf in turn.
 */
#include "aggmgr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"

/* "node17 mlx5_0" -> host "node17", device "mlx5_0" (either may be empty). */
static void aggmgr__ca_names(const char *desc, char *host, size_t hlen, char *dev,
                             size_t dlen)
{
    size_t n = strcspn(desc, " \t");
    const char *d = desc + n;

    snprintf(host, hlen, "%.*s", (int)n, desc);
    d += strspn(d, " \t");
    snprintf(dev, dlen, "%.*s", (int)strcspn(d, " \t"), d);
}

/* The adapter of `name` ("mlx5_0:1" or "mlx5_0") without its port. */
static void aggmgr__device(const char *name, char *dev, size_t dlen)
{
    snprintf(dev, dlen, "%.*s", (int)strcspn(name, ":"), name);
}

static int aggmgr__ca_usable(const aggmgr_t *am, int ca, const char *device, char *host,
                             size_t hlen)
{
    char dev[AGG_WIRE_NAME_LEN];

    aggmgr__ca_names(am->topo.nodes[am->topo.cas[ca]].desc, host, hlen, dev, sizeof(dev));
    return !am->ca_busy[ca] && am->topo.ca_switch[ca] >= 0 &&
           (device[0] == '\0' || strcmp(dev, device) == 0);
}

/* Each rank on an adapter of its own host; 1 done, 0 no host named, -1 error. */
static int aggmgr__place_by_host(const aggmgr_t *am, const agg_msg_job_create_t *req,
                                 const char *hosts, const uint32_t *host_of,
                                 const char *device, int *cas, char *why, size_t whylen)
{
    char host[AGG_WIRE_NAME_LEN], dev[AGG_WIRE_NAME_LEN];
    uint32_t h, r, named = 0, *turn;
    int ca, found;

    for (h = 0; h < req->num_hosts; ++h) {
        for (ca = 0; ca < am->topo.num_cas; ++ca) {
            aggmgr__ca_names(am->topo.nodes[am->topo.cas[ca]].desc, host, sizeof(host), dev,
                             sizeof(dev));
            if (strcmp(host, hosts + (size_t)h * AGG_WIRE_NAME_LEN) == 0) {
                named++;
                break;
            }
        }
    }
    if (named == 0) {
        return 0;
    }
    turn = calloc(req->num_hosts, sizeof(*turn));
    if (turn == NULL) {
        agg_errf(why, whylen, "out of memory");
        return -1;
    }
    for (r = 0; r < req->world_size; ++r) {
        const char *want = hosts + (size_t)host_of[r] * AGG_WIRE_NAME_LEN;
        uint32_t usable = 0, pick;

        /* the host's usable adapters, counted, then the rank takes its turn */
        for (ca = 0; ca < am->topo.num_cas; ++ca) {
            usable += aggmgr__ca_usable(am, ca, device, host, sizeof(host)) &&
                      strcmp(host, want) == 0;
        }
        if (usable == 0) {
            agg_errf(why, whylen, "the fabric (%s) has no free adapter%s%s of host %s, where "
                     "rank %u runs", am->topo.source, device[0] ? " of device " : "", device,
                     want, r);
            free(turn);
            return -1;
        }
        pick  = turn[host_of[r]]++ % usable;
        found = -1;
        for (ca = 0; ca < am->topo.num_cas && found < 0; ++ca) {
            if (aggmgr__ca_usable(am, ca, device, host, sizeof(host)) &&
                strcmp(host, want) == 0 && pick-- == 0) {
                found = ca;
            }
        }
        cas[r] = found;
    }
    free(turn);
    return 1;
}

/* Free adapters of a fabric that does not name the hosts: packed or spread. */
static int aggmgr__place_free(const aggmgr_t *am, const agg_msg_job_create_t *req,
                              const char *device, int *cas, char *why, size_t whylen)
{
    char host[AGG_WIRE_NAME_LEN];
    int spread = (req->flags & AGG_JOB_F_SPREAD) != 0, ca, *taken, *leaves, nleaves = 0, l;
    uint32_t r = 0;

    taken  = calloc((size_t)am->topo.num_cas, sizeof(*taken));
    leaves = calloc((size_t)am->topo.num_cas, sizeof(*leaves));
    if (taken == NULL || leaves == NULL) {
        free(taken);
        free(leaves);
        agg_errf(why, whylen, "out of memory");
        return -1;
    }
    if (!spread) {
        for (ca = 0; ca < am->topo.num_cas && r < req->world_size; ++ca) {
            if (aggmgr__ca_usable(am, ca, device, host, sizeof(host))) {
                cas[r++] = ca;
            }
        }
    } else {
        /* the leaf switches in fabric order, then one adapter of each in turn */
        for (ca = 0; ca < am->topo.num_cas; ++ca) {
            int sw = am->topo.ca_switch[ca], seen = 0;

            for (l = 0; l < nleaves && !seen; ++l) {
                seen = leaves[l] == sw;
            }
            if (!seen && sw >= 0) {
                leaves[nleaves++] = sw;
            }
        }
        while (r < req->world_size) {
            uint32_t before = r;

            for (l = 0; l < nleaves && r < req->world_size; ++l) {
                for (ca = 0; ca < am->topo.num_cas; ++ca) {
                    if (!taken[ca] && am->topo.ca_switch[ca] == leaves[l] &&
                        aggmgr__ca_usable(am, ca, device, host, sizeof(host))) {
                        taken[ca] = 1;
                        cas[r++]  = ca;
                        break;
                    }
                }
            }
            if (r == before) {
                break;
            }
        }
    }
    free(taken);
    free(leaves);
    if (r < req->world_size) {
        agg_errf(why, whylen, "the job has %u ranks; the fabric (%s) has %u free adapters%s%s",
                 req->world_size, am->topo.source, r, device[0] ? " of device " : "", device);
        return -1;
    }
    return 1;
}

agg_status_t aggmgr_place(const aggmgr_t *am, const agg_msg_job_create_t *req,
                          const char *hosts, const uint32_t *host_of, int *cas, char *why,
                          size_t whylen)
{
    char device[AGG_WIRE_NAME_LEN];
    int rc;

    aggmgr__device(req->device, device, sizeof(device));
    rc = aggmgr__place_by_host(am, req, hosts, host_of, device, cas, why, whylen);
    if (rc == 0) {
        rc = aggmgr__place_free(am, req, device, cas, why, whylen);
    }
    return rc > 0 ? AGG_OK : AGG_ERR_NO_RESOURCE;
}
