#!/bin/sh
# as_host.sh PREFIX N PROGRAM [ARGS...]: PROGRAM, an MPI rank, under the host
# name PREFIX<k> (k = its rank % N + 1) in a UTS namespace of its own, so
# that on one machine libagg takes it for a rank of another host and reaches
# switchsim over TCP (loopback). Needs root.
prefix=$1 n=$2
shift 2
exec unshare --uts -- sh -c 'hostname "$0" && exec "$@"' \
    "$prefix$(( ${OMPI_COMM_WORLD_RANK:-0} % n + 1 ))" "$@"
