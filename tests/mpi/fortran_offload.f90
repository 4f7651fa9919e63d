! Each of Open MPI's Fortran bindings reaches the shim: built three times,
! with the preprocessor choosing the binding, so that a run's AGG_STATS lines
! count one binding's calls alone:
!   fortran_offload_fh   include 'mpif.h'  (AGG_F_MPIFH)
!   fortran_offload_mod  use mpi           (AGG_F_MODULE)
!   fortran_offload_f08  use mpi_f08       (AGG_F_F08)
! The program starts MPI through its binding (MPI_Init, or MPI_Init_thread
! in the module build), then calls every collective the shim intercepts,
! blocking and not (completed by MPI_Wait, MPI_Test, MPI_Waitall), with
! MPI_IN_PLACE where MPI allows it, on MPI_COMM_WORLD and on communicators
! from MPI_Comm_dup, _split and _create, which MPI_Comm_free must set to
! MPI_COMM_NULL. Every rank checks its results; the totals travel point to
! point. Rank 0 prints "<program>: N passed, M failed"; a failure stops
! every rank with a non-zero code.
#if defined(AGG_F_F08)
#define AGG_F_COMM type(MPI_Comm)
#define AGG_F_GROUP type(MPI_Group)
#define AGG_F_REQ type(MPI_Request)
#define AGG_F_IERR
#define AGG_F_IERR_ONLY
#else
#define AGG_F_COMM integer
#define AGG_F_GROUP integer
#define AGG_F_REQ integer
#define AGG_F_IERR , ierr
#define AGG_F_IERR_ONLY ierr
#endif
program fortran_offload
#if defined(AGG_F_F08)
    use mpi_f08
    implicit none
    character(*), parameter :: prog = 'fortran_offload_f08'
#elif defined(AGG_F_MODULE)
    use mpi
    implicit none
    character(*), parameter :: prog = 'fortran_offload_mod'
#else
    implicit none
    include 'mpif.h'
    character(*), parameter :: prog = 'fortran_offload_fh'
#endif
    integer, parameter :: n = 1000, m = 16
    integer :: me, np, ierr, npass, nfail, p, tot(2), other(2), failed, provided
    AGG_F_COMM :: dup, half, sub
    AGG_F_GROUP :: grp

    ierr = MPI_SUCCESS
    provided = 0
#if defined(AGG_F_MODULE)
    call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
#else
    call MPI_Init(AGG_F_IERR_ONLY)
#endif
    call MPI_Comm_rank(MPI_COMM_WORLD, me AGG_F_IERR)
    call MPI_Comm_size(MPI_COMM_WORLD, np AGG_F_IERR)
    npass = 0
    nfail = 0
#if defined(AGG_F_MODULE)
    call check(ierr == MPI_SUCCESS .and. provided >= MPI_THREAD_FUNNELED, 'init_thread')
#endif

    call run(MPI_COMM_WORLD, 'world')

    call MPI_Comm_dup(MPI_COMM_WORLD, dup AGG_F_IERR)
    call check(ierr == MPI_SUCCESS, 'comm_dup')
    call run(dup, 'dup')
    call MPI_Comm_free(dup AGG_F_IERR)
    call check(ierr == MPI_SUCCESS .and. dup == MPI_COMM_NULL, 'comm_free (dup)')

    call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), np - me, half AGG_F_IERR)
    call check(ierr == MPI_SUCCESS, 'comm_split')
    call run(half, 'split')
    call MPI_Comm_free(half AGG_F_IERR)
    call check(ierr == MPI_SUCCESS .and. half == MPI_COMM_NULL, 'comm_free (split)')

    call MPI_Comm_group(MPI_COMM_WORLD, grp AGG_F_IERR)
    call MPI_Comm_create(MPI_COMM_WORLD, grp, sub AGG_F_IERR)
    call check(ierr == MPI_SUCCESS, 'comm_create')
    call MPI_Group_free(grp AGG_F_IERR)
    call run(sub, 'create')
    call MPI_Comm_free(sub AGG_F_IERR)
    call check(ierr == MPI_SUCCESS .and. sub == MPI_COMM_NULL, 'comm_free (create)')

    if (me == 0) then
        tot = [npass, nfail]
        do p = 1, np - 1
            call MPI_Recv(other, 2, MPI_INTEGER, p, 4722, MPI_COMM_WORLD, MPI_STATUS_IGNORE &
                          AGG_F_IERR)
            tot = tot + other
        end do
        failed = tot(2)
        do p = 1, np - 1
            call MPI_Send(failed, 1, MPI_INTEGER, p, 4723, MPI_COMM_WORLD AGG_F_IERR)
        end do
        write (*, '(a, a, i0, a, i0, a)') prog, ': ', tot(1), ' passed, ', tot(2), ' failed'
        flush (6)
    else
        call MPI_Send([npass, nfail], 2, MPI_INTEGER, 0, 4722, MPI_COMM_WORLD AGG_F_IERR)
        call MPI_Recv(failed, 1, MPI_INTEGER, 0, 4723, MPI_COMM_WORLD, MPI_STATUS_IGNORE &
                      AGG_F_IERR)
    end if
    call MPI_Finalize(AGG_F_IERR_ONLY)
    if (failed > 0) error stop 1

contains

    ! what rank r puts at element i: small integers, exact in every type
    pure integer function ival(r, i)
        integer, intent(in) :: r, i
        ival = mod(i * 7 + r * 13, 11) - 5
    end function ival

    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(*), intent(in) :: what

        if (ok) then
            npass = npass + 1
        else
            nfail = nfail + 1
            write (*, '(a, a, i0, a, a)') prog, ': rank ', me, ' FAILED ', what
        end if
    end subroutine check

    subroutine run(comm, name)
        AGG_F_COMM, intent(in) :: comm
        character(*), intent(in) :: name
        integer :: is(n), ir(n), isum(n), imax(n), blocks(m * 64), i, r, nr, rank, root
        double precision :: dr(n)
        logical :: done
        AGG_F_REQ :: req, reqs(3)

        call MPI_Comm_rank(comm, rank AGG_F_IERR)
        call MPI_Comm_size(comm, nr AGG_F_IERR)
        do i = 1, n
            is(i) = ival(rank, i)
            isum(i) = 0
            imax(i) = -1000
            do r = 0, nr - 1
                isum(i) = isum(i) + ival(r, i)
                imax(i) = max(imax(i), ival(r, i))
            end do
        end do

        ir = -999
        call MPI_Allreduce(is, ir, n, MPI_INTEGER, MPI_SUM, comm AGG_F_IERR)
        call check(ierr == MPI_SUCCESS .and. all(ir == isum), 'allreduce ' // name)

        dr = dble(is) * 0.5d0
        call MPI_Allreduce(MPI_IN_PLACE, dr, n, MPI_DOUBLE_PRECISION, MPI_MAX, comm AGG_F_IERR)
        call check(ierr == MPI_SUCCESS .and. all(dr == dble(imax) * 0.5d0), &
                   'allreduce in place ' // name)

        ir = -999
        call MPI_Iallreduce(is, ir, n, MPI_INTEGER, MPI_SUM, comm, req AGG_F_IERR)
        call MPI_Wait(req, MPI_STATUS_IGNORE AGG_F_IERR)
        call check(ierr == MPI_SUCCESS .and. all(ir == isum) .and. req == MPI_REQUEST_NULL, &
                   'iallreduce + wait ' // name)

        ir = is
        call MPI_Iallreduce(MPI_IN_PLACE, ir, n, MPI_INTEGER, MPI_MAX, comm, req AGG_F_IERR)
        done = .false.
        do while (.not. done)
            call MPI_Test(req, done, MPI_STATUS_IGNORE AGG_F_IERR)
        end do
        call check(ierr == MPI_SUCCESS .and. all(ir == imax), 'iallreduce in place + test ' // name)

        root = nr - 1
        ir = is
        if (rank == root) then
            call MPI_Reduce(MPI_IN_PLACE, ir, n, MPI_INTEGER, MPI_SUM, root, comm AGG_F_IERR)
        else
            call MPI_Reduce(is, ir, n, MPI_INTEGER, MPI_SUM, root, comm AGG_F_IERR)
        end if
        call check(ierr == MPI_SUCCESS .and. (rank /= root .or. all(ir == isum)), &
                   'reduce (in place at the root) ' // name)

        ir = -999
        if (rank == 0) dr = [(dble(i) + 0.25d0, i = 1, n)]
        call MPI_Ireduce(is, ir, n, MPI_INTEGER, MPI_MAX, 0, comm, reqs(1) AGG_F_IERR)
        call MPI_Ibcast(dr, n, MPI_DOUBLE_PRECISION, 0, comm, reqs(2) AGG_F_IERR)
        call MPI_Ibarrier(comm, reqs(3) AGG_F_IERR)
        call MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE AGG_F_IERR)
        call check(ierr == MPI_SUCCESS .and. (rank /= 0 .or. all(ir == imax)) .and. &
                   all(dr == [(dble(i) + 0.25d0, i = 1, n)]), &
                   'ireduce + ibcast + ibarrier + waitall ' // name)

        ir = -999
        if (rank == root) ir = [(i * 3 + root, i = 1, n)]
        call MPI_Bcast(ir, n, MPI_INTEGER, root, comm AGG_F_IERR)
        call check(ierr == MPI_SUCCESS .and. all(ir == [(i * 3 + root, i = 1, n)]), &
                   'bcast ' // name)

        call MPI_Barrier(comm AGG_F_IERR)
        call check(ierr == MPI_SUCCESS, 'barrier ' // name)

        ! in place: rank r's block starts at r * m + 1 (nr <= 64)
        blocks = -1
        blocks(rank * m + 1:rank * m + m) = [(rank * 1000 + i, i = 1, m)]
        call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, blocks, m, MPI_INTEGER, comm &
                           AGG_F_IERR)
        call check(ierr == MPI_SUCCESS .and. &
                   all([((blocks(r * m + i) == r * 1000 + i, i = 1, m), r = 0, nr - 1)]), &
                   'allgather in place ' // name)

        blocks(1:m * nr) = [((ival(rank, r * m + i), i = 1, m), r = 0, nr - 1)]
        call MPI_Reduce_scatter_block(MPI_IN_PLACE, blocks, m, MPI_INTEGER, MPI_SUM, comm &
                                      AGG_F_IERR)
        call check(ierr == MPI_SUCCESS .and. all(blocks(1:m) == isum(rank * m + 1:rank * m + m)), &
                   'reduce_scatter_block in place ' // name)
    end subroutine run
end program fortran_offload
