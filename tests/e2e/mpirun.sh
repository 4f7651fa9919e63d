#!/usr/bin/env bash
# mpirun with an Open MPI session directory of its own. Two mpiruns started
# at the same moment race to create the per-user session directory in /tmp
# ("mkdir ... /tmp/ompi.HOST.UID: File exists", orte_init fails), which
# failed e2e.two_jobs in CI. exec keeps mpirun's pid the caller's.
set -eu
dir=$(mktemp -d "${E2E_MPIRUN_TMP:-/tmp}/ompi.XXXXXX")
exec mpirun --mca orte_tmpdir_base "$dir" "$@"
