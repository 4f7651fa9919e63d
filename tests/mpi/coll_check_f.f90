! Results of the collectives the shim intercepts, called from Fortran through
! the mpi_f08 module (this file) and through mpif.h (coll_check_fh.f90):
! MPI_Allreduce (also MPI_IN_PLACE), MPI_Iallreduce, MPI_Reduce (every root,
! in place at the root), MPI_Bcast (every root), MPI_Barrier, MPI_Ibarrier,
! MPI_Allgather (also in place) and MPI_Reduce_scatter_block, on
! MPI_COMM_WORLD and on a split communicator. Every rank computes the
! expected values itself; the totals travel point to point.
!
! Prints "coll_check_f: N passed, M failed" on rank 0 and stops with a
! non-zero code on every rank when anything failed.
program coll_check_f
    use mpi_f08
    implicit none
    interface
        subroutine coll_check_fh(npass, nfail)
            integer, intent(inout) :: npass, nfail
        end subroutine coll_check_fh
    end interface
    integer :: me, np, npass, nfail, p, tot(2), other(2), total_failed
    type(MPI_Comm) :: half

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, me)
    call MPI_Comm_size(MPI_COMM_WORLD, np)
    npass = 0
    nfail = 0

    call run_f08(MPI_COMM_WORLD, 'world')
    call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), np - me, half)
    call run_f08(half, 'half (reversed)')
    call MPI_Comm_free(half)
    call coll_check_fh(npass, nfail)

    if (me == 0) then
        tot = [npass, nfail]
        do p = 1, np - 1
            call MPI_Recv(other, 2, MPI_INTEGER, p, 4712, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
            tot = tot + other
        end do
        total_failed = tot(2)
        do p = 1, np - 1
            call MPI_Send(total_failed, 1, MPI_INTEGER, p, 4713, MPI_COMM_WORLD)
        end do
        write (*, '(a, i0, a, i0, a)') 'coll_check_f: ', tot(1), ' passed, ', tot(2), ' failed'
        flush (6)
    else
        call MPI_Send([npass, nfail], 2, MPI_INTEGER, 0, 4712, MPI_COMM_WORLD)
        call MPI_Recv(total_failed, 1, MPI_INTEGER, 0, 4713, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    end if
    call MPI_Finalize()
    if (total_failed > 0) stop 1

contains

    ! what rank r puts at element i: small integers, exact in every type
    pure integer function ival(r, i, salt)
        integer, intent(in) :: r, i, salt
        ival = mod(i * 7 + r * 13 + salt * 3, 11) - 5
    end function ival

    subroutine tally(bad, what, comm_name, n, extra)
        integer, intent(in) :: bad, n, extra
        character(len=*), intent(in) :: what, comm_name
        if (bad == 0) then
            npass = npass + 1
        else
            nfail = nfail + 1
            write (0, '(a, i0, 5a, i0, a, i0, a, i0, a)') 'coll_check_f: FAIL rank ', me, ': ', &
                what, ' comm ', comm_name, ' count ', n, ' root/arg ', extra, ': ', bad, &
                ' elements wrong'
        end if
    end subroutine tally

    subroutine run_f08(comm, comm_name)
        type(MPI_Comm), intent(in) :: comm
        character(len=*), intent(in) :: comm_name
        integer, parameter :: counts(6) = [1, 2, 7, 65, 1000, 65536]
        integer, allocatable, asynchronous :: is(:), ir(:)
        real(8), allocatable :: dr(:), ps(:, :), pr(:, :)
        real(4), allocatable :: fs(:), fr(:)
        logical, allocatable :: ls(:), lr(:)
        integer(8), allocatable :: ks(:), kr(:)
        character(len=64) :: text, want_text
        type(MPI_Request) :: req
        integer :: rank, nr, c, n, i, p, bad, root, salt, e
        integer(8) :: ke
        real(8) :: de, pv, pi
        logical :: le

        call MPI_Comm_rank(comm, rank)
        call MPI_Comm_size(comm, nr)
        salt = 0
        do c = 1, size(counts)
            n = counts(c)
            salt = salt + 1
            allocate (is(n), ir(n), dr(n), fs(n), fr(n), ls(n), lr(n), ks(n), kr(n))
            allocate (ps(2, n), pr(2, n))

            ! integer sum, out of place
            do i = 1, n
                is(i) = ival(rank, i, salt)
            end do
            ir = -999
            call MPI_Allreduce(is, ir, n, MPI_INTEGER, MPI_SUM, comm)
            bad = 0
            do i = 1, n
                e = 0
                do p = 0, nr - 1
                    e = e + ival(p, i, salt)
                end do
                if (ir(i) /= e) bad = bad + 1
            end do
            call tally(bad, 'f08 allreduce integer sum', comm_name, n, 0)

            ! integer sum, non-blocking
            ir = -999
            call MPI_Iallreduce(is, ir, n, MPI_INTEGER, MPI_SUM, comm, req)
            call MPI_Wait(req, MPI_STATUS_IGNORE)
            bad = 0
            do i = 1, n
                e = 0
                do p = 0, nr - 1
                    e = e + ival(p, i, salt)
                end do
                if (ir(i) /= e) bad = bad + 1
            end do
            call tally(bad, 'f08 iallreduce integer sum', comm_name, n, 0)

            ! double max, in place
            do i = 1, n
                dr(i) = real(ival(rank, i, salt + 1), 8) * 0.5d0
            end do
            call MPI_Allreduce(MPI_IN_PLACE, dr, n, MPI_DOUBLE_PRECISION, MPI_MAX, comm)
            bad = 0
            do i = 1, n
                de = -huge(de)
                do p = 0, nr - 1
                    de = max(de, real(ival(p, i, salt + 1), 8) * 0.5d0)
                end do
                if (dr(i) /= de) bad = bad + 1
            end do
            call tally(bad, 'f08 allreduce in place double precision max', comm_name, n, 0)

            ! real min, integer(8) prod (values 1 and 2 on two ranks), logical and/or
            do i = 1, n
                fs(i) = real(ival(rank, i, salt + 2), 4)
                ks(i) = 1
                if (rank < 2 .and. mod(i + rank, 3) == 0) ks(i) = 2
                ls(i) = mod(i, 3) /= 0 .or. rank == mod(i, nr)
            end do
            call MPI_Allreduce(fs, fr, n, MPI_REAL, MPI_MIN, comm)
            call MPI_Allreduce(ks, kr, n, MPI_INTEGER8, MPI_PROD, comm)
            bad = 0
            do i = 1, n
                e = 100
                ke = 1
                do p = 0, nr - 1
                    e = min(e, ival(p, i, salt + 2))
                    if (p < 2 .and. mod(i + p, 3) == 0) ke = ke * 2
                end do
                if (fr(i) /= real(e, 4) .or. kr(i) /= ke) bad = bad + 1
            end do
            call tally(bad, 'f08 allreduce real min + integer8 prod', comm_name, n, 0)
            call MPI_Allreduce(ls, lr, n, MPI_LOGICAL, MPI_LAND, comm)
            bad = 0
            do i = 1, n
                le = .true.
                do p = 0, nr - 1
                    le = le .and. (mod(i, 3) /= 0 .or. p == mod(i, nr))
                end do
                if (lr(i) .neqv. le) bad = bad + 1
            end do
            call tally(bad, 'f08 allreduce logical land', comm_name, n, 0)
            do i = 1, n
                ls(i) = mod(i, 3) == 0 .and. rank == mod(i, nr)
            end do
            call MPI_Allreduce(MPI_IN_PLACE, ls, n, MPI_LOGICAL, MPI_LOR, comm)
            bad = 0
            do i = 1, n
                le = .false.
                do p = 0, nr - 1
                    le = le .or. (mod(i, 3) == 0 .and. p == mod(i, nr))
                end do
                if (ls(i) .neqv. le) bad = bad + 1
            end do
            call tally(bad, 'f08 allreduce in place logical lor', comm_name, n, 0)

            ! MAXLOC on pairs of doubles: ties go to the smaller index
            do i = 1, n
                ps(1, i) = real(mod(i + rank * 3, 4), 8)
                ps(2, i) = real(mod(rank * 7 + i * 3, 13), 8)
            end do
            call MPI_Allreduce(ps, pr, n, MPI_2DOUBLE_PRECISION, MPI_MAXLOC, comm)
            bad = 0
            do i = 1, n
                pv = -1
                pi = 0
                do p = 0, nr - 1
                    de = real(mod(p * 7 + i * 3, 13), 8)
                    if (real(mod(i + p * 3, 4), 8) > pv .or. &
                        (real(mod(i + p * 3, 4), 8) == pv .and. de < pi)) then
                        pv = real(mod(i + p * 3, 4), 8)
                        pi = de
                    end if
                end do
                if (pr(1, i) /= pv .or. pr(2, i) /= pi) bad = bad + 1
            end do
            call tally(bad, 'f08 allreduce 2double_precision maxloc', comm_name, n, 0)

            ! reduce: every root, in place at the odd ones
            do root = 0, nr - 1
                ir = -999
                if (rank == root .and. mod(root, 2) == 1) then
                    ir = is
                    call MPI_Reduce(MPI_IN_PLACE, ir, n, MPI_INTEGER, MPI_SUM, root, comm)
                else
                    call MPI_Reduce(is, ir, n, MPI_INTEGER, MPI_SUM, root, comm)
                end if
                bad = 0
                if (rank == root) then
                    do i = 1, n
                        e = 0
                        do p = 0, nr - 1
                            e = e + ival(p, i, salt)
                        end do
                        if (ir(i) /= e) bad = bad + 1
                    end do
                end if
                call tally(bad, 'f08 reduce integer sum', comm_name, n, root)
            end do

            ! bcast: every root
            do root = 0, nr - 1
                do i = 1, n
                    dr(i) = -1d300
                    if (rank == root) dr(i) = real(i, 8) * 1.25d0 + real(root, 8)
                end do
                call MPI_Bcast(dr, n, MPI_DOUBLE_PRECISION, root, comm)
                bad = 0
                do i = 1, n
                    if (dr(i) /= real(i, 8) * 1.25d0 + real(root, 8)) bad = bad + 1
                end do
                call tally(bad, 'f08 bcast double precision', comm_name, n, root)
            end do

            deallocate (is, ir, dr, fs, fr, ls, lr, ks, kr, ps, pr)
        end do

        ! a string
        write (want_text, '(a, i0)') 'broadcast from the last rank of ', nr
        text = ' '
        if (rank == nr - 1) text = want_text
        call MPI_Bcast(text, len(text), MPI_CHARACTER, nr - 1, comm)
        bad = 0
        if (text /= want_text) bad = 1
        call tally(bad, 'f08 bcast character', comm_name, len(text), nr - 1)

        ! allgather, out of place and in place
        n = 3
        allocate (is(n), ir(n * nr))
        do i = 1, n
            is(i) = rank * 100 + i
        end do
        ir = -1
        call MPI_Allgather(is, n, MPI_INTEGER, ir, n, MPI_INTEGER, comm)
        bad = 0
        do p = 0, nr - 1
            do i = 1, n
                if (ir(p * n + i) /= p * 100 + i) bad = bad + 1
            end do
        end do
        call tally(bad, 'f08 allgather integer', comm_name, n, 0)
        ir = -1
        ir(rank * n + 1:rank * n + n) = is
        call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ir, n, MPI_INTEGER, comm)
        bad = 0
        do p = 0, nr - 1
            do i = 1, n
                if (ir(p * n + i) /= p * 100 + i) bad = bad + 1
            end do
        end do
        call tally(bad, 'f08 allgather in place integer', comm_name, n, 0)
        deallocate (is, ir)

        ! reduce_scatter_block: block b of the sum goes to rank b
        n = 5
        allocate (is(n * nr), ir(n))
        do i = 1, n * nr
            is(i) = ival(rank, i, 77)
        end do
        ir = -999
        call MPI_Reduce_scatter_block(is, ir, n, MPI_INTEGER, MPI_SUM, comm)
        bad = 0
        do i = 1, n
            e = 0
            do p = 0, nr - 1
                e = e + ival(p, rank * n + i, 77)
            end do
            if (ir(i) /= e) bad = bad + 1
        end do
        call tally(bad, 'f08 reduce_scatter_block integer sum', comm_name, n, 0)
        deallocate (is, ir)

        ! barriers: they must return
        call MPI_Barrier(comm)
        call MPI_Ibarrier(comm, req)
        call MPI_Wait(req, MPI_STATUS_IGNORE)
        call tally(0, 'f08 barrier + ibarrier', comm_name, 0, 0)
    end subroutine run_f08

end program coll_check_f
