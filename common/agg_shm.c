#include "agg/shm.h"
#include "agg/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

agg_status_t agg_shm_create(const char *name, size_t size, void **addr)
{
    void *p;
    int fd;

    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        agg_error("shm_open(%s) failed: %s", name, strerror(errno));
        return AGG_ERR_IO;
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        agg_error("ftruncate(%s, %zu) failed: %s", name, size, strerror(errno));
        goto err_unlink;
    }
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        agg_error("mmap(%s, %zu) failed: %s", name, size, strerror(errno));
        goto err_unlink;
    }
    close(fd);
    *addr = p;
    return AGG_OK;

err_unlink:
    close(fd);
    shm_unlink(name);
    return AGG_ERR_IO;
}

agg_status_t agg_shm_attach(const char *name, void **addr, size_t *size)
{
    struct stat st;
    void *p;
    int fd;

    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        agg_error("shm_open(%s) failed: %s", name, strerror(errno));
        return AGG_ERR_IO;
    }
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        agg_error("shared memory segment %s is empty or unreadable", name);
        close(fd);
        return AGG_ERR_IO;
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        agg_error("mmap(%s) failed: %s", name, strerror(errno));
        return AGG_ERR_IO;
    }
    *addr = p;
    *size = (size_t)st.st_size;
    return AGG_OK;
}

void agg_shm_detach(void *addr, size_t size)
{
    if (addr != NULL) {
        munmap(addr, size);
    }
}

void agg_shm_unlink(const char *name)
{
    shm_unlink(name);
}

int agg_shm_sweep(void)
{
    struct dirent *e;
    DIR *d = opendir("/dev/shm");
    char name[300];
    int n = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid;

        if (strncmp(e->d_name, "agg-", 4) != 0) {
            continue;
        }
        pid = strtol(e->d_name + 4, &end, 10);
        if (end == e->d_name + 4 || *end != '-' || pid <= 0 || pid > INT_MAX) {
            continue; /* not a name of ours */
        }
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
            continue; /* its process lives (EPERM: it exists, another user's) */
        }
        snprintf(name, sizeof(name), "/%s", e->d_name);
        if (shm_unlink(name) == 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

agg_status_t agg_futex_wait(uint32_t *addr, uint32_t val, int timeout_ms)
{
    struct timespec ts;
    long rc;

    ts.tv_sec  = timeout_ms / 1000;
    ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
    rc = syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
    if (rc == -1 && errno == ETIMEDOUT) {
        return AGG_ERR_TIMEOUT;
    }
    return AGG_OK; /* woken, value changed (EAGAIN) or interrupted: re-check */
}

void agg_futex_wake(uint32_t *addr, int count)
{
    syscall(SYS_futex, addr, FUTEX_WAKE, count > 0 ? count : INT_MAX, NULL, NULL, 0);
}
