! The same collectives through the old mpif.h interface (integer handles),
! called by coll_check_f after its mpi_f08 checks: MPI_Allreduce (also
! MPI_IN_PLACE), MPI_Reduce (every root), MPI_Bcast (every root),
! MPI_Barrier, MPI_Allgather, MPI_Allgatherv, MPI_Reduce_scatter_block and
! MPI_Reduce_scatter, on MPI_COMM_WORLD and on a communicator of the first
! three ranks.
subroutine coll_check_fh(npass, nfail)
    implicit none
    include 'mpif.h'
    integer, intent(inout) :: npass, nfail
    integer :: lower, ierr, me

    call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
    call run_mpif(MPI_COMM_WORLD, 'world')
    call MPI_Comm_split(MPI_COMM_WORLD, merge(1, 0, me < 3), me, lower, ierr)
    call run_mpif(lower, 'first3/rest')
    call MPI_Comm_free(lower, ierr)

contains

    pure integer function ival(r, i, salt)
        integer, intent(in) :: r, i, salt
        ival = mod(i * 5 + r * 17 + salt, 13) - 6
    end function ival

    subroutine tally(bad, ierr, what, comm_name, n, extra)
        integer, intent(in) :: bad, ierr, n, extra
        character(len=*), intent(in) :: what, comm_name
        if (bad == 0 .and. ierr == MPI_SUCCESS) then
            npass = npass + 1
        else
            nfail = nfail + 1
            write (0, '(a, i0, 5a, i0, a, i0, a, i0, a, i0)') 'coll_check_f: FAIL rank ', me, &
                ': ', what, ' comm ', comm_name, ' count ', n, ' root/arg ', extra, ': ', &
                bad, ' elements wrong, ierr ', ierr
        end if
    end subroutine tally

    subroutine run_mpif(comm, comm_name)
        integer, intent(in) :: comm
        character(len=*), intent(in) :: comm_name
        integer, parameter :: counts(5) = [1, 3, 64, 1000, 4097]
        integer, allocatable :: is(:), ir(:), rcounts(:), displs(:)
        double precision, allocatable :: dr(:)
        integer :: rank, nr, c, n, i, k, p, e, bad, root, ierr

        call MPI_Comm_rank(comm, rank, ierr)
        call MPI_Comm_size(comm, nr, ierr)
        do c = 1, size(counts)
            n = counts(c)
            allocate (is(n), ir(n), dr(n))
            do i = 1, n
                is(i) = ival(rank, i, c)
            end do

            ir = -999
            call MPI_Allreduce(is, ir, n, MPI_INTEGER, MPI_SUM, comm, ierr)
            bad = 0
            do i = 1, n
                e = 0
                do p = 0, nr - 1
                    e = e + ival(p, i, c)
                end do
                if (ir(i) /= e) bad = bad + 1
            end do
            call tally(bad, ierr, 'mpif.h allreduce integer sum', comm_name, n, 0)

            ir = is
            call MPI_Allreduce(MPI_IN_PLACE, ir, n, MPI_INTEGER, MPI_MIN, comm, ierr)
            bad = 0
            do i = 1, n
                e = 1000
                do p = 0, nr - 1
                    e = min(e, ival(p, i, c))
                end do
                if (ir(i) /= e) bad = bad + 1
            end do
            call tally(bad, ierr, 'mpif.h allreduce in place integer min', comm_name, n, 0)

            do i = 1, n
                dr(i) = dble(ival(rank, i, c)) * 0.25d0
            end do
            call MPI_Allreduce(MPI_IN_PLACE, dr, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
            bad = 0
            do i = 1, n
                e = 0
                do p = 0, nr - 1
                    e = e + ival(p, i, c)
                end do
                if (dr(i) /= dble(e) * 0.25d0) bad = bad + 1
            end do
            call tally(bad, ierr, 'mpif.h allreduce in place double precision sum', comm_name, &
                       n, 0)

            do root = 0, nr - 1
                ir = -999
                call MPI_Reduce(is, ir, n, MPI_INTEGER, MPI_MAX, root, comm, ierr)
                bad = 0
                if (rank == root) then
                    do i = 1, n
                        e = -1000
                        do p = 0, nr - 1
                            e = max(e, ival(p, i, c))
                        end do
                        if (ir(i) /= e) bad = bad + 1
                    end do
                end if
                call tally(bad, ierr, 'mpif.h reduce integer max', comm_name, n, root)

                ir = -999
                if (rank == root) ir = [(i * 3 + root, i = 1, n)]
                call MPI_Bcast(ir, n, MPI_INTEGER, root, comm, ierr)
                bad = 0
                do i = 1, n
                    if (ir(i) /= i * 3 + root) bad = bad + 1
                end do
                call tally(bad, ierr, 'mpif.h bcast integer', comm_name, n, root)
            end do
            deallocate (is, ir, dr)
        end do

        n = 4
        allocate (is(n), ir(n * nr))
        is = [(rank * 1000 + i, i = 1, n)]
        ir = -1
        call MPI_Allgather(is, n, MPI_INTEGER, ir, n, MPI_INTEGER, comm, ierr)
        bad = 0
        do p = 0, nr - 1
            do i = 1, n
                if (ir(p * n + i) /= p * 1000 + i) bad = bad + 1
            end do
        end do
        call tally(bad, ierr, 'mpif.h allgather integer', comm_name, n, 0)
        deallocate (is, ir)

        ! rank p sends p + 2 elements, placed in reverse rank order with a gap of one
        allocate (rcounts(nr), displs(nr), is(rank + 2), ir(nr * (nr + 4)))
        e = 1
        do p = nr - 1, 0, -1
            rcounts(p + 1) = p + 2
            displs(p + 1) = e
            e = e + p + 3
        end do
        is = [(rank * 1000 + i, i = 1, rank + 2)]
        ir = -1
        call MPI_Allgatherv(is, rank + 2, MPI_INTEGER, ir, rcounts, displs, MPI_INTEGER, comm, &
                            ierr)
        bad = 0
        do p = 0, nr - 1
            do i = 1, p + 2
                if (ir(displs(p + 1) + i) /= p * 1000 + i) bad = bad + 1
            end do
            if (ir(displs(p + 1)) /= -1) bad = bad + 1 ! the gap before each block
        end do
        call tally(bad, ierr, 'mpif.h allgatherv integer', comm_name, nr, 0)
        deallocate (is, ir, rcounts, displs)

        n = 6
        allocate (is(n * nr), ir(n))
        is = [(ival(rank, i, 9), i = 1, n * nr)]
        allocate (rcounts(nr))
        rcounts = n
        ! block b of the sum goes to rank b: with one count, then a counts array (all alike)
        do k = 1, 2
            ir = -999
            if (k == 1) then
                call MPI_Reduce_scatter_block(is, ir, n, MPI_INTEGER, MPI_SUM, comm, ierr)
            else
                call MPI_Reduce_scatter(is, ir, rcounts, MPI_INTEGER, MPI_SUM, comm, ierr)
            end if
            bad = 0
            do i = 1, n
                e = 0
                do p = 0, nr - 1
                    e = e + ival(p, rank * n + i, 9)
                end do
                if (ir(i) /= e) bad = bad + 1
            end do
            if (k == 1) then
                call tally(bad, ierr, 'mpif.h reduce_scatter_block integer sum', comm_name, n, 0)
            else
                call tally(bad, ierr, 'mpif.h reduce_scatter integer sum', comm_name, n, 0)
            end if
        end do
        deallocate (is, ir, rcounts)

        call MPI_Barrier(comm, ierr)
        call tally(0, ierr, 'mpif.h barrier', comm_name, 0, 0)
    end subroutine run_mpif

end subroutine coll_check_fh
