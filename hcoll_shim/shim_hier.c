/*
 * Node leaders (HCOLL's hierarchy, HCOLL_SBGP=basesmuma,...): where ranks
 * of a host share an adapter, one rank per host (the lowest of the
 * communicator there) talks to the tree for all of them. The others reduce
 * to it and receive from it through shared memory, i.e. Open MPI's own
 * intra-host collectives on a communicator of the host's members (vader,
 * single copy). Only the leaders have a group; so the tree's resources go
 * per host, not per rank. When every rank has its own adapter (the job's
 * placement says so) or HCOLL_SBGP has no shared-memory level, the
 * communicator stays flat: every rank has its own place in the group.
 *
 * Blocking allreduce, bcast and barrier take this path (shim_path_leaders,
 * with host buffers: device ones are staged first); the others go to MPI,
 * counted as "leaders". A failure in the tree fails alike on every
 * leader, which then redo their step on the host from what they kept; the
 * members of their hosts never see it.
 */
#include <stdlib.h>
#include <string.h>

#include "agg/log.h"
#include "shim.h"

void shim_hier_setup(shim_comm_t *sc)
{
    int node_rank, node_size, most = 0, mine[2];
    int *both;

    PMPI_Comm_split_type(sc->pcomm, MPI_COMM_TYPE_SHARED, sc->rank, MPI_INFO_NULL, &sc->node);
    PMPI_Comm_rank(sc->node, &node_rank);
    PMPI_Comm_size(sc->node, &node_size);
    PMPI_Allreduce(&node_size, &most, 1, MPI_INT, MPI_MAX, sc->pcomm);
    if (most < 2) {
        PMPI_Comm_free(&sc->node); /* one rank per host: nothing to lead */
        return;
    }
    sc->leader = node_rank == 0;
    PMPI_Comm_split(sc->pcomm, sc->leader ? 0 : MPI_UNDEFINED, sc->rank, &sc->leaders);
    /* every rank's host leader among the leaders, and its rank on its host */
    mine[0] = -1;
    if (sc->leader) {
        PMPI_Comm_rank(sc->leaders, &mine[0]);
    }
    PMPI_Bcast(&mine[0], 1, MPI_INT, 0, sc->node);
    mine[1]       = node_rank;
    both          = malloc(2 * (size_t)sc->size * sizeof(int));
    sc->leader_of = malloc((size_t)sc->size * sizeof(int));
    sc->node_rank = malloc((size_t)sc->size * sizeof(int));
    if (both == NULL || sc->leader_of == NULL || sc->node_rank == NULL) {
        agg_error("node leaders: out of memory for a communicator of %d ranks", sc->size);
        PMPI_Abort(MPI_COMM_WORLD, 1);
    }
    PMPI_Allgather(mine, 2, MPI_INT, both, 2, MPI_INT, sc->pcomm);
    for (int r = 0; r < sc->size; ++r) {
        sc->leader_of[r] = both[2 * r];
        sc->node_rank[r] = both[2 * r + 1];
    }
    free(both);
    sc->hier = 1;
    if (sc->rank == 0) {
        agg_info("communicator of %d ranks: one leader per host talks to the tree (ranks "
                 "share adapters; HCOLL_SBGP has a shared-memory level), up to %d ranks "
                 "per host", sc->size, most);
    }
}

void shim_hier_free(shim_comm_t *sc)
{
    if (sc->node != MPI_COMM_NULL) {
        PMPI_Comm_free(&sc->node);
    }
    if (sc->leaders != MPI_COMM_NULL) {
        PMPI_Comm_free(&sc->leaders);
    }
    free(sc->leader_of);
    free(sc->node_rank);
    sc->leader_of = sc->node_rank = NULL;
    sc->hier      = 0;
}

agg_status_t shim_hier_group(shim_comm_t *sc)
{
    agg_comm_spec_t spec = {.oob_ctx = &sc->leaders};
    MPI_Group group, world_group;
    int *ranks = NULL, *world = NULL, i, st = AGG_OK;

    if (sc->leader) {
        PMPI_Comm_rank(sc->leaders, &spec.rank);
        PMPI_Comm_size(sc->leaders, &spec.size);
        ranks = malloc((size_t)spec.size * sizeof(int));
        world = malloc((size_t)spec.size * sizeof(int));
        st    = ranks != NULL && world != NULL ? AGG_OK : AGG_ERR_NO_MEMORY;
        PMPI_Allreduce(MPI_IN_PLACE, &st, 1, MPI_INT, MPI_MIN, sc->leaders);
    }
    if (sc->leader && st == AGG_OK) {
        for (i = 0; i < spec.size; ++i) {
            ranks[i] = i;
        }
        PMPI_Comm_group(sc->leaders, &group);
        PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
        PMPI_Group_translate_ranks(group, spec.size, ranks, world_group, world);
        PMPI_Group_free(&group);
        PMPI_Group_free(&world_group);
        spec.world_ranks = world;
        st = agg_comm_init(shim.ctx, &spec, &sc->agg);
    }
    free(ranks);
    free(world);
    /* the leaders agree already; their hosts learn it (statuses are negative) */
    PMPI_Allreduce(MPI_IN_PLACE, &st, 1, MPI_INT, MPI_MIN, sc->pcomm);
    if (st != AGG_OK && sc->agg != NULL) {
        agg_comm_destroy(sc->agg);
        sc->agg = NULL;
    }
    return (agg_status_t)st;
}

static int shim_hier_allreduce(shim_comm_t *sc, const void *sbuf, void *rbuf, int count,
                               MPI_Datatype dtype, MPI_Op op, const agg_reduce_spec_t *spec)
{
    const void *in = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    size_t bytes = (size_t)count * agg_dtype_size(spec->dtype);
    void *part = NULL;
    int rc;

    if (sc->leader) {
        /* the host's partial is kept apart: if the tree fails, it is redone from it */
        part = shim_scratch(sc, bytes);
        if (part == NULL) {
            agg_error("node leader: no memory for a %zu-byte partial result", bytes);
            PMPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    rc = PMPI_Reduce(in, part, count, dtype, op, 0, sc->node);
    if (rc != MPI_SUCCESS) {
        return rc;
    }
    if (sc->leader) {
        agg_reduce_spec_t up = *spec;
        agg_request_t *req;
        agg_status_t st;

        up.sbuf = part;
        up.rbuf = rbuf;
        st = agg_iallreduce(sc->agg, &up, &req);
        st = st == AGG_OK ? shim_net_wait(SHIM_FN_ALLREDUCE, req) : st;
        if (st != AGG_OK) {
            agg_warn("allreduce failed in the network (%s); the leaders complete it on the "
                     "host", agg_strerror(st));
            shim_host_tune_t tune; /* the leaders' own table: sc->tune is for all ranks */
            int nleaders;

            PMPI_Comm_size(sc->leaders, &nleaders);
            shim_host_tune_static(&tune, nleaders);
            rc = shim_host_allreduce(part, rbuf, count, dtype, op, sc->leaders,
                                     shim_host_choose(&tune, bytes, nleaders));
        }
    } else {
        shim_count(SHIM_FN_ALLREDUCE, SHIM_PATH_LLT, SHIM_WHY_NONE);
    }
    return rc != MPI_SUCCESS ? rc : PMPI_Bcast(rbuf, count, dtype, 0, sc->node);
}

static int shim_hier_bcast(shim_comm_t *sc, void *buf, int count, MPI_Datatype dtype, int root,
                           size_t bytes)
{
    int lroot = sc->leader_of[root], me = -1, rc = MPI_SUCCESS;
    /* on the root's host the root itself sends: its buffer is never written */
    int nroot = lroot == sc->leader_of[sc->rank] ? sc->node_rank[root] : 0;

    if (sc->leader) {
        PMPI_Comm_rank(sc->leaders, &me);
    }
    /* a root that does not lead its host hands the data to its leader first */
    if (sc->node_rank[root] != 0) {
        if (sc->rank == root) {
            rc = PMPI_Send(buf, count, dtype, 0, 0, sc->node);
        } else if (me == lroot) {
            rc = PMPI_Recv(buf, count, dtype, sc->node_rank[root], 0, sc->node,
                           MPI_STATUS_IGNORE);
        }
    }
    if (rc == MPI_SUCCESS && sc->leader) {
        agg_data_spec_t ds = {.sbuf = buf, .rbuf = buf, .bytes = bytes, .root = lroot};
        agg_request_t *req;
        agg_status_t st = agg_ibcast(sc->agg, &ds, &req);

        st = st == AGG_OK ? shim_net_wait(SHIM_FN_BCAST, req) : st;
        if (st != AGG_OK) {
            /* the root's leader never writes its own buffer: it still has the data */
            agg_warn("bcast failed in the network (%s); the leaders complete it on the host",
                     agg_strerror(st));
            rc = PMPI_Bcast(buf, count, dtype, lroot, sc->leaders);
        }
    } else if (rc == MPI_SUCCESS) {
        shim_count(SHIM_FN_BCAST, SHIM_PATH_LLT, SHIM_WHY_NONE);
    }
    return rc != MPI_SUCCESS ? rc : PMPI_Bcast(buf, count, dtype, nroot, sc->node);
}

static int shim_hier_barrier(shim_comm_t *sc)
{
    int rc = PMPI_Barrier(sc->node);

    if (rc == MPI_SUCCESS && sc->leader) {
        agg_request_t *req;
        agg_status_t st = agg_ibarrier(sc->agg, &req);

        st = st == AGG_OK ? shim_net_wait(SHIM_FN_BARRIER, req) : st;
        if (st != AGG_OK) {
            rc = PMPI_Barrier(sc->leaders);
        }
    } else if (rc == MPI_SUCCESS) {
        shim_count(SHIM_FN_BARRIER, SHIM_PATH_LLT, SHIM_WHY_NONE);
    }
    return rc != MPI_SUCCESS ? rc : PMPI_Barrier(sc->node);
}

static int shim_leaders_take(shim_call_t *c)
{
    return c->route == SHIM_ROUTE_NET && c->sc->hier && c->smem == AGG_MEM_HOST &&
           c->rmem == AGG_MEM_HOST;
}

static int shim_leaders_run(shim_call_t *c)
{
    int rc;

    switch (c->coll) {
    case AGG_COLL_ALLREDUCE:
        return shim_hier_allreduce(c->sc, c->sbuf, c->rbuf, c->count, c->dtype, c->op,
                                   &c->spec.red);
    case AGG_COLL_BCAST:
        shim_bcast_pack(c); /* the leaders move bytes */
        rc = shim_hier_bcast(c->sc, c->spec.data.rbuf, (int)c->bytes, MPI_BYTE, c->root,
                             (size_t)c->bytes);
        return rc != MPI_SUCCESS ? rc : shim_bcast_unpack(c);
    default:
        return shim_hier_barrier(c->sc);
    }
}

const shim_call_path_ops_t shim_path_leaders = {"leaders", shim_leaders_take, shim_leaders_run};
