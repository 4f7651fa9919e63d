/*
 * The Fortran bindings. Open MPI's (libmpi_mpifh.so) call PMPI_ directly,
 * so a Fortran program would never reach the shim's MPI_ functions. Each
 * of its three bindings crosses a library boundary on the way, where a
 * preloaded definition wins (calls within one library may not be
 * interposed, calls between libraries go through the PLT):
 *
 *   mpif.h, use mpi   the program calls mpi_allreduce_ (or another mangling
 *                     of MPI_ALLREDUCE) in libmpi_mpifh.so;
 *   use mpi_f08       the program calls mpi_allreduce_f08_ in
 *                     libmpi_usempif08.so, which calls ompi_allreduce_f in
 *                     libmpi_mpifh.so.
 *
 * There the manglings are aliases of ompi_allreduce_f; here they are too.
 * Each entry converts the Fortran handles and sentinels as Open MPI's does
 * and calls the shim's C function, so a Fortran call counts, routes and
 * fails as a C call does. The pmpi_ names stay Open MPI's: a profiling
 * tool calling them wants MPI untouched. MPI_Init and MPI_Finalize are
 * here because the shim is set up and torn down there.
 *
 * The wait and test calls are not: their Fortran forms reach Open MPI's
 * PMPI_ ones (f08's test calls through pmpi_test_), whose progress engine
 * runs shim_progress, which completes offloaded requests. Unlike the
 * shim's C MPI_Wait, that never times a request out (AGG_COLL_TIMEOUT_MS).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "shim.h"

/*
 * Fortran's MPI_IN_PLACE and MPI_BOTTOM: variables in common blocks, which
 * Open MPI names in each of the four manglings a Fortran compiler may use.
 */
enum { SHIM_F_MANGLINGS = 4 };

static const void *shim_f_in_place[SHIM_F_MANGLINGS];
static const void *shim_f_bottom[SHIM_F_MANGLINGS];
static pthread_once_t shim_f_once = PTHREAD_ONCE_INIT;

static void shim_f_sentinels_find(void)
{
    static const char *const in_place[SHIM_F_MANGLINGS] = {
        "mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__",
        "MPI_FORTRAN_IN_PLACE"};
    static const char *const bottom[SHIM_F_MANGLINGS] = {
        "mpi_fortran_bottom_", "mpi_fortran_bottom", "mpi_fortran_bottom__",
        "MPI_FORTRAN_BOTTOM"};

    /* the definition every object's references were bound to: the first */
    for (int i = 0; i < SHIM_F_MANGLINGS; ++i) {
        shim_f_in_place[i] = dlsym(RTLD_DEFAULT, in_place[i]);
        shim_f_bottom[i]   = dlsym(RTLD_DEFAULT, bottom[i]);
    }
}

static int shim_f_is(const void *const *sentinel, const void *buf)
{
    for (int i = 0; i < SHIM_F_MANGLINGS; ++i) {
        if (sentinel[i] != NULL && sentinel[i] == buf) {
            return 1;
        }
    }
    return 0;
}

/* A buffer argument: Fortran's MPI_BOTTOM becomes C's. */
static void *shim_f_buf(void *buf)
{
    pthread_once(&shim_f_once, shim_f_sentinels_find);
    return shim_f_is(shim_f_bottom, buf) ? MPI_BOTTOM : buf;
}

/* A send buffer: MPI_IN_PLACE too. */
static const void *shim_f_sbuf(void *buf)
{
    pthread_once(&shim_f_once, shim_f_sentinels_find);
    return shim_f_is(shim_f_in_place, buf) ? MPI_IN_PLACE : shim_f_buf(buf);
}

/* Writes a Fortran ierror, which the f08 wrappers may leave out. */
static inline void shim_f_ret(MPI_Fint *ierr, int rc)
{
    if (ierr != NULL) {
        *ierr = (MPI_Fint)rc;
    }
}

/* A non-blocking call's Fortran request, made only on success. */
static inline void shim_f_req(MPI_Fint *ierr, int rc, MPI_Request req, MPI_Fint *freq)
{
    if (rc == MPI_SUCCESS) {
        *freq = PMPI_Request_c2f(req);
    }
    shim_f_ret(ierr, rc);
}

/* A new communicator's Fortran handle, written only on success. */
static inline void shim_f_comm(MPI_Fint *ierr, int rc, MPI_Comm comm, MPI_Fint *fcomm)
{
    if (rc == MPI_SUCCESS) {
        *fcomm = PMPI_Comm_c2f(comm);
    }
    shim_f_ret(ierr, rc);
}

/*
 * Declares Open MPI's entry ompi_<lower>_f, defined next, and exports it
 * under every mangling a Fortran compiler may give MPI_<NAME>: lower case
 * with none, one or two underscores, and upper case.
 */
#define SHIM_F_ENTRY(_lower, _upper, _params)                                             \
    SHIM_API void ompi_##_lower##_f _params;                                              \
    SHIM_API void mpi_##_lower _params __attribute__((alias("ompi_" #_lower "_f")));      \
    SHIM_API void mpi_##_lower##_ _params __attribute__((alias("ompi_" #_lower "_f")));   \
    SHIM_API void mpi_##_lower##__ _params __attribute__((alias("ompi_" #_lower "_f")));  \
    SHIM_API void _upper _params __attribute__((alias("ompi_" #_lower "_f")))

/* ---- set-up ------------------------------------------------------------ */

SHIM_F_ENTRY(init, MPI_INIT, (MPI_Fint *ierr));
void ompi_init_f(MPI_Fint *ierr)
{
    int argc = 0;
    char **argv = NULL;

    shim_f_ret(ierr, MPI_Init(&argc, &argv));
}

SHIM_F_ENTRY(init_thread, MPI_INIT_THREAD, (MPI_Fint *required, MPI_Fint *provided,
             MPI_Fint *ierr));
void ompi_init_thread_f(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    int argc = 0, prov = MPI_THREAD_SINGLE;
    char **argv = NULL;
    int rc = MPI_Init_thread(&argc, &argv, (int)*required, &prov);

    if (rc == MPI_SUCCESS) {
        *provided = (MPI_Fint)prov;
    }
    shim_f_ret(ierr, rc);
}

SHIM_F_ENTRY(finalize, MPI_FINALIZE, (MPI_Fint *ierr));
void ompi_finalize_f(MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Finalize());
}

/* ---- communicators ----------------------------------------------------- */

SHIM_F_ENTRY(comm_dup, MPI_COMM_DUP, (MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr));
void ompi_comm_dup_f(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c_new = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(PMPI_Comm_f2c(*comm), &c_new);

    shim_f_comm(ierr, rc, c_new, newcomm);
}

SHIM_F_ENTRY(comm_split, MPI_COMM_SPLIT, (MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key,
             MPI_Fint *newcomm, MPI_Fint *ierr));
void ompi_comm_split_f(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
                       MPI_Fint *ierr)
{
    MPI_Comm c_new = MPI_COMM_NULL;
    int rc = MPI_Comm_split(PMPI_Comm_f2c(*comm), (int)*color, (int)*key, &c_new);

    shim_f_comm(ierr, rc, c_new, newcomm);
}

SHIM_F_ENTRY(comm_create, MPI_COMM_CREATE, (MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm,
             MPI_Fint *ierr));
void ompi_comm_create_f(MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c_new = MPI_COMM_NULL;
    int rc = MPI_Comm_create(PMPI_Comm_f2c(*comm), PMPI_Group_f2c(*group), &c_new);

    shim_f_comm(ierr, rc, c_new, newcomm);
}

SHIM_F_ENTRY(comm_free, MPI_COMM_FREE, (MPI_Fint *comm, MPI_Fint *ierr));
void ompi_comm_free_f(MPI_Fint *comm, MPI_Fint *ierr)
{
    MPI_Comm c_comm = PMPI_Comm_f2c(*comm);
    int rc = MPI_Comm_free(&c_comm);

    /* c_comm is MPI_COMM_NULL now, whose Fortran handle goes back */
    shim_f_comm(ierr, rc, c_comm, comm);
}

/* ---- reductions -------------------------------------------------------- */

SHIM_F_ENTRY(allreduce, MPI_ALLREDUCE, (char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype,
             MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr));
void ompi_allreduce_f(char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *op,
                      MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Allreduce(shim_f_sbuf(sbuf), shim_f_buf(rbuf), (int)*count,
                                   PMPI_Type_f2c(*dtype), PMPI_Op_f2c(*op),
                                   PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(iallreduce, MPI_IALLREDUCE, (char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype,
             MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr));
void ompi_iallreduce_f(char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *op,
                       MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(shim_f_sbuf(sbuf), shim_f_buf(rbuf), (int)*count,
                            PMPI_Type_f2c(*dtype), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm),
                            &req);

    shim_f_req(ierr, rc, req, request);
}

SHIM_F_ENTRY(reduce, MPI_REDUCE, (char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype,
             MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr));
void ompi_reduce_f(char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *op,
                   MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Reduce(shim_f_sbuf(sbuf), shim_f_buf(rbuf), (int)*count,
                                PMPI_Type_f2c(*dtype), PMPI_Op_f2c(*op), (int)*root,
                                PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(ireduce, MPI_IREDUCE, (char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype,
             MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr));
void ompi_ireduce_f(char *sbuf, char *rbuf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *op,
                    MPI_Fint *root, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce(shim_f_sbuf(sbuf), shim_f_buf(rbuf), (int)*count,
                         PMPI_Type_f2c(*dtype), PMPI_Op_f2c(*op), (int)*root,
                         PMPI_Comm_f2c(*comm), &req);

    shim_f_req(ierr, rc, req, request);
}

SHIM_F_ENTRY(reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK, (char *sbuf, char *rbuf,
             MPI_Fint *rcount, MPI_Fint *dtype, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr));
void ompi_reduce_scatter_block_f(char *sbuf, char *rbuf, MPI_Fint *rcount, MPI_Fint *dtype,
                                 MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Reduce_scatter_block(shim_f_sbuf(sbuf), shim_f_buf(rbuf),
                                              (int)*rcount, PMPI_Type_f2c(*dtype),
                                              PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK, (char *sbuf, char *rbuf,
             MPI_Fint *rcount, MPI_Fint *dtype, MPI_Fint *op, MPI_Fint *comm,
             MPI_Fint *request, MPI_Fint *ierr));
void ompi_ireduce_scatter_block_f(char *sbuf, char *rbuf, MPI_Fint *rcount, MPI_Fint *dtype,
                                  MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request,
                                  MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce_scatter_block(shim_f_sbuf(sbuf), shim_f_buf(rbuf), (int)*rcount,
                                       PMPI_Type_f2c(*dtype), PMPI_Op_f2c(*op),
                                       PMPI_Comm_f2c(*comm), &req);

    shim_f_req(ierr, rc, req, request);
}

/* an array of Fortran INTEGER counts is an array of int: passed as it is */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "MPI_Fint is not int");

SHIM_F_ENTRY(reduce_scatter, MPI_REDUCE_SCATTER, (char *sbuf, char *rbuf, MPI_Fint *rcounts,
             MPI_Fint *dtype, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr));
void ompi_reduce_scatter_f(char *sbuf, char *rbuf, MPI_Fint *rcounts, MPI_Fint *dtype,
                           MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Reduce_scatter(shim_f_sbuf(sbuf), shim_f_buf(rbuf), (int *)rcounts,
                                        PMPI_Type_f2c(*dtype), PMPI_Op_f2c(*op),
                                        PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(ireduce_scatter, MPI_IREDUCE_SCATTER, (char *sbuf, char *rbuf, MPI_Fint *rcounts,
             MPI_Fint *dtype, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request,
             MPI_Fint *ierr));
void ompi_ireduce_scatter_f(char *sbuf, char *rbuf, MPI_Fint *rcounts, MPI_Fint *dtype,
                            MPI_Fint *op, MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce_scatter(shim_f_sbuf(sbuf), shim_f_buf(rbuf), (int *)rcounts,
                                 PMPI_Type_f2c(*dtype), PMPI_Op_f2c(*op),
                                 PMPI_Comm_f2c(*comm), &req);

    shim_f_req(ierr, rc, req, request);
}

/* ---- data movement and synchronisation --------------------------------- */

SHIM_F_ENTRY(bcast, MPI_BCAST, (char *buf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *root,
             MPI_Fint *comm, MPI_Fint *ierr));
void ompi_bcast_f(char *buf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *root, MPI_Fint *comm,
                  MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Bcast(shim_f_buf(buf), (int)*count, PMPI_Type_f2c(*dtype),
                               (int)*root, PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(ibcast, MPI_IBCAST, (char *buf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *root,
             MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr));
void ompi_ibcast_f(char *buf, MPI_Fint *count, MPI_Fint *dtype, MPI_Fint *root, MPI_Fint *comm,
                   MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(shim_f_buf(buf), (int)*count, PMPI_Type_f2c(*dtype), (int)*root,
                        PMPI_Comm_f2c(*comm), &req);

    shim_f_req(ierr, rc, req, request);
}

SHIM_F_ENTRY(allgather, MPI_ALLGATHER, (char *sbuf, MPI_Fint *scount, MPI_Fint *stype, char *rbuf,
             MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr));
void ompi_allgather_f(char *sbuf, MPI_Fint *scount, MPI_Fint *stype, char *rbuf,
                      MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Allgather(shim_f_sbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                                   shim_f_buf(rbuf), (int)*rcount, PMPI_Type_f2c(*rtype),
                                   PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(iallgather, MPI_IALLGATHER, (char *sbuf, MPI_Fint *scount, MPI_Fint *stype,
             char *rbuf, MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *request,
             MPI_Fint *ierr));
void ompi_iallgather_f(char *sbuf, MPI_Fint *scount, MPI_Fint *stype, char *rbuf,
                       MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *request,
                       MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Iallgather(shim_f_sbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                            shim_f_buf(rbuf), (int)*rcount, PMPI_Type_f2c(*rtype),
                            PMPI_Comm_f2c(*comm), &req);

    shim_f_req(ierr, rc, req, request);
}

SHIM_F_ENTRY(allgatherv, MPI_ALLGATHERV, (char *sbuf, MPI_Fint *scount, MPI_Fint *stype,
             char *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
             MPI_Fint *ierr));
void ompi_allgatherv_f(char *sbuf, MPI_Fint *scount, MPI_Fint *stype, char *rbuf,
                       MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                       MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Allgatherv(shim_f_sbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                                    shim_f_buf(rbuf), (int *)rcounts, (int *)displs,
                                    PMPI_Type_f2c(*rtype), PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(iallgatherv, MPI_IALLGATHERV, (char *sbuf, MPI_Fint *scount, MPI_Fint *stype,
             char *rbuf, MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
             MPI_Fint *request, MPI_Fint *ierr));
void ompi_iallgatherv_f(char *sbuf, MPI_Fint *scount, MPI_Fint *stype, char *rbuf,
                        MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                        MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Iallgatherv(shim_f_sbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                             shim_f_buf(rbuf), (int *)rcounts, (int *)displs,
                             PMPI_Type_f2c(*rtype), PMPI_Comm_f2c(*comm), &req);

    shim_f_req(ierr, rc, req, request);
}

SHIM_F_ENTRY(barrier, MPI_BARRIER, (MPI_Fint *comm, MPI_Fint *ierr));
void ompi_barrier_f(MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_ret(ierr, MPI_Barrier(PMPI_Comm_f2c(*comm)));
}

SHIM_F_ENTRY(ibarrier, MPI_IBARRIER, (MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr));
void ompi_ibarrier_f(MPI_Fint *comm, MPI_Fint *request, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(PMPI_Comm_f2c(*comm), &req);

    shim_f_req(ierr, rc, req, request);
}
