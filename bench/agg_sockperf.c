/*
 * Raw TCP throughput between two hosts, to hold the stack's TCP transport
 * against (tests/e2e/netns.sh): what one socket moves in one direction when
 * nothing else is done with the bytes.
 *
 *   agg_sockperf -s HOST:PORT                 receive: print the bytes, once
 *   agg_sockperf -c HOST:PORT [-t SEC] [-b BYTES]
 *                                             send BYTES-sized writes for SEC
 *                                             seconds, then print GB/s
 *
 * The receiver reads into one buffer and answers with the byte count when
 * the sender closes its side; the sender's time ends with that answer, so
 * the figure is bytes delivered, not bytes buffered.
 *
 *   agg_sockperf -s HOST:PORT -e [-T]         echo: send back what comes in
 *   agg_sockperf -c HOST:PORT -e [-T] [-t SEC] [-b BYTES] [-w WINDOW]
 *                                             send and receive the echo at
 *                                             once (at most WINDOW bytes
 *                                             unanswered), print GB/s each way
 *
 * The echo is what the TCP transport does with one member (its buffer up,
 * the result back): by default one thread at each end does both directions,
 * as the transport's do; -T gives each end a thread per direction, the bound
 * of a design with a sending and a receiving thread; -2 sends on one
 * connection and echoes back on a second: with -T, the bound of a transport
 * with a thread and a connection per direction (no socket's lock shared by
 * the two directions); -P K runs K echo connections at once, each with one
 * thread at each end for both directions: the bound of a transport that
 * deals a call's fragments over K connections ("lanes"), with nothing handed
 * between threads per fragment; -P K -1 drives the K connections from one
 * thread at each end (a poll loop), the bound of lanes without threads.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int resolve(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256], *colon;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;

    snprintf(host, sizeof(host), "%s", addr);
    colon = strrchr(host, ':');
    if (colon == NULL) {
        fprintf(stderr, "agg_sockperf: %s is not HOST:PORT\n", addr);
        return -1;
    }
    *colon = '\0';
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
        fprintf(stderr, "agg_sockperf: cannot resolve %s\n", addr);
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* a measuring program: with no memory or thread there is nothing to measure */
static void *alloc_or_exit(size_t n)
{
    void *p = malloc(n);

    if (p == NULL) {
        fprintf(stderr, "agg_sockperf: cannot allocate %zu bytes (-b too large?)\n", n);
        exit(2);
    }
    return p;
}

static void start_or_exit(pthread_t *th, void *(*fn)(void *), void *arg)
{
    if (pthread_create(th, NULL, fn, arg) != 0) {
        fprintf(stderr, "agg_sockperf: cannot start a thread\n");
        exit(2);
    }
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, 0);

        if (k <= 0) {
            perror("agg_sockperf: send");
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The echo with a thread per direction: a ring between the reading thread
   and the writing one (or, at the client, the count of bytes unanswered). */
typedef struct {
    int             fd;
    char           *ring;
    size_t          size, chunk;
    uint64_t        in, out; /* bytes read into the ring, written out of it */
    int             eof, err;
    pthread_mutex_t mu;
    pthread_cond_t  cv;
} echo_t;

static void *echo_writer(void *arg)
{
    echo_t *e = arg;

    pthread_mutex_lock(&e->mu);
    for (;;) {
        size_t off, n;

        while (e->out == e->in && !e->eof && !e->err) {
            pthread_cond_wait(&e->cv, &e->mu);
        }
        if (e->out == e->in || e->err) {
            break;
        }
        off = (size_t)(e->out % e->size);
        n   = (size_t)(e->in - e->out);
        if (n > e->size - off) {
            n = e->size - off;
        }
        pthread_mutex_unlock(&e->mu);
        if (send_all(e->fd, e->ring + off, n) != 0) {
            pthread_mutex_lock(&e->mu);
            e->err = 1;
            pthread_cond_broadcast(&e->cv);
            break;
        }
        pthread_mutex_lock(&e->mu);
        e->out += n;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* Echoes what comes in on fd back on out (fd itself, or the second connection). */
static uint64_t echo_serve(int fd, int out, size_t bufsize, int threaded)
{
    uint64_t total = 0;
    ssize_t n;

    if (!threaded) {
        char *buf = alloc_or_exit(bufsize);

        while ((n = recv(fd, buf, bufsize, 0)) > 0 &&
               send_all(out, buf, (size_t)n) == 0) {
            total += (uint64_t)n;
        }
        free(buf);
    } else {
        echo_t e = {.fd = out, .size = 8 * bufsize, .chunk = bufsize}; /* its writer's */
        pthread_t th;

        e.ring = alloc_or_exit(e.size);
        pthread_mutex_init(&e.mu, NULL);
        pthread_cond_init(&e.cv, NULL);
        start_or_exit(&th, echo_writer, &e);
        for (;;) {
            size_t off, room;

            pthread_mutex_lock(&e.mu);
            while (e.in - e.out == e.size && !e.err) {
                pthread_cond_wait(&e.cv, &e.mu);
            }
            if (e.err) {
                pthread_mutex_unlock(&e.mu);
                break;
            }
            off  = (size_t)(e.in % e.size);
            room = e.size - (size_t)(e.in - e.out);
            pthread_mutex_unlock(&e.mu);
            if (room > e.size - off) {
                room = e.size - off;
            }
            if (room > e.chunk) {
                room = e.chunk;
            }
            n = recv(fd, e.ring + off, room, 0);
            pthread_mutex_lock(&e.mu);
            if (n <= 0) {
                e.eof = 1;
                pthread_cond_broadcast(&e.cv);
                pthread_mutex_unlock(&e.mu);
                break;
            }
            e.in += (uint64_t)n;
            total += (uint64_t)n;
            pthread_cond_broadcast(&e.cv);
            pthread_mutex_unlock(&e.mu);
        }
        pthread_join(th, NULL);
        free(e.ring);
    }
    shutdown(out, SHUT_WR);
    return total;
}

/* client, threaded: this thread receives the echo, e->in counts it */
static void *echo_receiver(void *arg)
{
    echo_t *e = arg;
    ssize_t n;

    while ((n = recv(e->fd, e->ring, e->chunk, 0)) > 0) {
        pthread_mutex_lock(&e->mu);
        e->in += (uint64_t)n;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
    }
    pthread_mutex_lock(&e->mu);
    e->eof = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* Sends for `seconds` with at most `window` bytes unanswered; returns the
   bytes echoed back (all that was sent, or 0 on error). */
static uint64_t echo_drive(int fd, int back, char *buf, size_t bufsize, size_t window,
                           double seconds, int threaded)
{
    uint64_t sent = 0, got = 0;
    double t0 = now();

    if (threaded) {
        echo_t e = {.fd = back, .ring = alloc_or_exit(bufsize), .chunk = bufsize};
        pthread_t th;

        pthread_mutex_init(&e.mu, NULL);
        pthread_cond_init(&e.cv, NULL);
        start_or_exit(&th, echo_receiver, &e);
        while (now() - t0 < seconds) {
            int eof;

            pthread_mutex_lock(&e.mu);
            while (sent - e.in + bufsize > window && !e.eof) {
                pthread_cond_wait(&e.cv, &e.mu);
            }
            eof = e.eof;
            pthread_mutex_unlock(&e.mu);
            if (eof || send_all(fd, buf, bufsize) != 0) {
                break;
            }
            sent += bufsize;
        }
        shutdown(fd, SHUT_WR);
        pthread_join(th, NULL);
        got = e.in;
        free(e.ring);
    } else {
        char *rbuf = alloc_or_exit(bufsize);
        size_t part = 0; /* of the chunk being sent */
        int writing = 1;

        /* [0]: the echo comes back here; [1]: sending, when it is another connection */
        for (;;) {
            struct pollfd pfd[2] = {{.fd = back, .events = POLLIN}, {.fd = fd}};
            nfds_t npfd = back == fd ? 1 : 2;
            short *out = back == fd ? &pfd[0].events : &pfd[1].events;
            ssize_t n;

            if (writing && now() - t0 >= seconds && part == 0) {
                shutdown(fd, SHUT_WR);
                writing = 0;
            }
            if (writing && sent + bufsize - got <= window) {
                *out |= POLLOUT;
            }
            if (poll(pfd, npfd, 10000) <= 0) {
                break;
            }
            if (pfd[0].revents & POLLIN) {
                n = recv(back, rbuf, bufsize, MSG_DONTWAIT);
                if (n <= 0) {
                    break;
                }
                got += (uint64_t)n;
            }
            if (pfd[npfd - 1].revents & POLLOUT) {
                n = send(fd, buf + part, bufsize - part, MSG_DONTWAIT);
                if (n > 0) {
                    part += (size_t)n;
                    if (part == bufsize) {
                        part = 0;
                        sent += bufsize;
                    }
                }
            }
        }
        free(rbuf);
    }
    return got == sent ? got : 0;
}

typedef struct {
    int       fd, back;
    size_t    bufsize, window;
    double    seconds;
    uint64_t  bytes;
    pthread_t th;
} lane_t;

static void *lane_serve(void *arg)
{
    lane_t *l = arg;

    l->bytes = echo_serve(l->fd, l->fd, l->bufsize, 0);
    return NULL;
}

static void *lane_drive(void *arg)
{
    lane_t *l = arg;
    char *buf = memset(alloc_or_exit(l->bufsize), 0, l->bufsize);

    l->bytes = echo_drive(l->fd, l->fd, buf, l->bufsize, l->window, l->seconds, 0);
    free(buf);
    return NULL;
}

/* -P K -1, server: one thread echoes every connection */
static uint64_t lanes_serve1(lane_t *l, int lanes, size_t bufsize)
{
    struct pollfd *pfd = alloc_or_exit(sizeof(*pfd) * (size_t)lanes);
    char *buf = alloc_or_exit(bufsize);
    uint64_t total = 0;
    int open = lanes, i;

    for (i = 0; i < lanes; ++i) {
        pfd[i] = (struct pollfd){.fd = l[i].fd, .events = POLLIN};
    }
    while (open > 0 && poll(pfd, (nfds_t)lanes, 10000) > 0) {
        for (i = 0; i < lanes; ++i) {
            ssize_t n;

            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            n = recv(pfd[i].fd, buf, bufsize, MSG_DONTWAIT);
            if (n > 0 && send_all(pfd[i].fd, buf, (size_t)n) == 0) {
                total += (uint64_t)n;
            } else if (n == 0 || (n < 0 && errno != EAGAIN)) {
                shutdown(pfd[i].fd, SHUT_WR);
                pfd[i].fd = -1;
                open--;
            }
        }
    }
    free(buf);
    free(pfd);
    return total;
}

/* -P K -1, client: one thread sends on every connection and takes the echoes */
static int lanes_drive1(lane_t *l, int lanes, size_t bufsize, size_t window, double seconds,
                        uint64_t *total)
{
    struct pollfd *pfd = alloc_or_exit(sizeof(*pfd) * (size_t)lanes);
    uint64_t *sent = calloc((size_t)lanes, sizeof(*sent)), *got = calloc((size_t)lanes, sizeof(*got));
    size_t *part = calloc((size_t)lanes, sizeof(*part));
    char *buf = memset(alloc_or_exit(bufsize), 0, bufsize), *rbuf = alloc_or_exit(bufsize);
    int i, writing = 1, open = lanes, bad = 0;
    double t0 = now();

    if (sent == NULL || got == NULL || part == NULL) {
        exit(2);
    }
    while (open > 0) {
        if (writing && now() - t0 >= seconds) {
            for (i = 0; i < lanes; ++i) {
                if (part[i] != 0) {
                    break;
                }
            }
            if (i == lanes) {
                for (i = 0; i < lanes; ++i) {
                    shutdown(l[i].fd, SHUT_WR);
                }
                writing = 0;
            }
        }
        for (i = 0; i < lanes; ++i) {
            pfd[i] = (struct pollfd){.fd = l[i].fd, .events = POLLIN};
            if (writing && sent[i] + bufsize - got[i] <= window) {
                pfd[i].events |= POLLOUT;
            }
        }
        if (poll(pfd, (nfds_t)lanes, 10000) <= 0) {
            bad = 1;
            break;
        }
        for (i = 0; i < lanes; ++i) {
            ssize_t n;

            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                n = recv(l[i].fd, rbuf, bufsize, MSG_DONTWAIT);
                if (n > 0) {
                    got[i] += (uint64_t)n;
                } else if (n == 0 || errno != EAGAIN) {
                    bad |= n < 0 || writing;
                    open -= 1;
                    l[i].fd = -l[i].fd - 2; /* not polled again */
                    pfd[i].fd = -1;
                }
            }
            if (l[i].fd >= 0 && (pfd[i].revents & POLLOUT)) {
                n = send(l[i].fd, buf + part[i], bufsize - part[i], MSG_DONTWAIT);
                if (n > 0 && (part[i] += (size_t)n) == bufsize) {
                    part[i] = 0;
                    sent[i] += bufsize;
                }
            }
        }
        if (bad) {
            break;
        }
    }
    *total = 0;
    for (i = 0; i < lanes; ++i) {
        bad |= got[i] != sent[i];
        *total += got[i];
        if (l[i].fd < -1) {
            l[i].fd = -l[i].fd - 2;
        }
    }
    free(sent);
    free(got);
    free(part);
    free(buf);
    free(rbuf);
    free(pfd);
    return bad ? -1 : 0;
}

static int serve(const char *addr, size_t bufsize, int echo, int threaded, int two, int lanes,
                 int one_thread)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd, fd, out, one = 1;
    uint64_t total = 0;
    char *buf = alloc_or_exit(bufsize);
    ssize_t n;

    if (resolve(addr, &ss, &len) != 0) {
        return 2;
    }
    lfd = socket(ss.ss_family, SOCK_STREAM, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&ss, len) != 0 || listen(lfd, 2) != 0) {
        perror("agg_sockperf: listen");
        return 2;
    }
    printf("listening\n");
    fflush(stdout);
    if (lanes > 1) {
        lane_t *l = alloc_or_exit(sizeof(*l) * (size_t)lanes);
        int i;

        for (i = 0; i < lanes; ++i) {
            l[i] = (lane_t){.fd = accept(lfd, NULL, NULL), .bufsize = bufsize};
            if (l[i].fd < 0) {
                perror("agg_sockperf: accept");
                return 2;
            }
        }
        if (one_thread) {
            total = lanes_serve1(l, lanes, bufsize);
        }
        for (i = 0; i < lanes && !one_thread; ++i) {
            start_or_exit(&l[i].th, lane_serve, &l[i]);
        }
        for (i = 0; i < lanes; ++i) {
            if (!one_thread) {
                pthread_join(l[i].th, NULL);
                total += l[i].bytes;
            }
            close(l[i].fd);
        }
        printf("received %llu bytes on %d connections\n", (unsigned long long)total, lanes);
        free(l);
        free(buf);
        close(lfd);
        return 0;
    }
    fd  = accept(lfd, NULL, NULL);
    out = fd >= 0 && two ? accept(lfd, NULL, NULL) : fd;
    if (fd < 0 || out < 0) {
        perror("agg_sockperf: accept");
        return 2;
    }
    if (echo) {
        total = echo_serve(fd, out, bufsize, threaded);
    } else {
        while ((n = recv(fd, buf, bufsize, 0)) > 0) {
            total += (uint64_t)n;
        }
    }
    if (!echo && send(fd, &total, sizeof(total), 0) != (ssize_t)sizeof(total)) {
        perror("agg_sockperf: send");
    }
    printf("received %llu bytes\n", (unsigned long long)total);
    if (out != fd) {
        close(out);
    }
    close(fd);
    close(lfd);
    free(buf);
    return 0;
}

/* A connection to the server (tried for 2 s while it starts); -1 when none. */
static int connect_to(const struct sockaddr_storage *ss, socklen_t len)
{
    int fd, one = 1, tries;

    for (tries = 0;; ++tries) {
        fd = socket(ss->ss_family, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (const struct sockaddr *)ss, len) == 0) {
            break;
        }
        close(fd);
        if (tries > 100) {
            perror("agg_sockperf: connect");
            return -1;
        }
        usleep(20000);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static int drive(const char *addr, double seconds, size_t bufsize, size_t window, int echo,
                 int threaded, int two, int lanes, int one_thread)
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint64_t sent = 0, got = 0;
    char *buf = memset(alloc_or_exit(bufsize), 0, bufsize);
    double t0, t1;
    int fd, back;

    if (resolve(addr, &ss, &len) != 0) {
        return 2;
    }
    if (lanes > 1) {
        lane_t *l = alloc_or_exit(sizeof(*l) * (size_t)lanes);
        int i, bad = 0;

        for (i = 0; i < lanes; ++i) {
            l[i] = (lane_t){.fd = connect_to(&ss, len), .bufsize = bufsize,
                            .window = window, .seconds = seconds};
            if (l[i].fd < 0) {
                return 2;
            }
        }
        t0 = now();
        if (one_thread) {
            bad = lanes_drive1(l, lanes, bufsize, window, seconds, &sent) != 0;
        }
        for (i = 0; i < lanes && !one_thread; ++i) {
            start_or_exit(&l[i].th, lane_drive, &l[i]);
        }
        for (i = 0; i < lanes; ++i) {
            if (!one_thread) {
                pthread_join(l[i].th, NULL);
                bad  |= l[i].bytes == 0;
                sent += l[i].bytes;
            }
            close(l[i].fd);
        }
        t1 = now();
        free(l);
        free(buf);
        if (bad) {
            fprintf(stderr, "agg_sockperf: the echo did not all come back\n");
            return 1;
        }
        printf("agg_sockperf: echo (%d connections, %s): %llu bytes each way "
               "in %.3f s: %.3f GB/s each way\n", lanes,
               one_thread ? "one thread an end for all" : "a thread an end each", (unsigned long long)sent, t1 - t0,
               (double)sent / (t1 - t0) / 1e9);
        return 0;
    }
    fd   = connect_to(&ss, len);
    back = fd >= 0 && two ? connect_to(&ss, len) : fd;
    if (fd < 0 || back < 0) {
        return 2;
    }
    t0 = now();
    if (echo) {
        sent = echo_drive(fd, back, buf, bufsize, window, seconds, threaded);
        t1   = now();
        if (sent == 0) {
            fprintf(stderr, "agg_sockperf: the echo did not all come back\n");
            return 1;
        }
        printf("agg_sockperf: echo%s: %llu bytes each way in %.3f s: %.3f GB/s each way\n",
               threaded && two ? " (a thread and a connection each way)" :
               threaded ? " (a thread per direction)" : two ? " (a connection each way)" : "",
               (unsigned long long)sent, t1 - t0, (double)sent / (t1 - t0) / 1e9);
        if (back != fd) {
            close(back);
        }
        close(fd);
        free(buf);
        return 0;
    }
    while (now() - t0 < seconds) {
        ssize_t n = send(fd, buf, bufsize, 0);

        if (n <= 0) {
            perror("agg_sockperf: send");
            return 2;
        }
        sent += (uint64_t)n;
    }
    shutdown(fd, SHUT_WR);
    if (recv(fd, &got, sizeof(got), MSG_WAITALL) != (ssize_t)sizeof(got) || got != sent) {
        fprintf(stderr, "agg_sockperf: the receiver counted %llu of %llu bytes\n",
                (unsigned long long)got, (unsigned long long)sent);
        return 1;
    }
    t1 = now();
    printf("agg_sockperf: %llu bytes in %.3f s: %.3f GB/s\n", (unsigned long long)sent,
           t1 - t0, (double)sent / (t1 - t0) / 1e9);
    close(fd);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    const char *server = NULL, *client = NULL;
    double seconds = 3;
    size_t bufsize = 4u << 20, window = 16u << 20;
    int opt, echo = 0, threaded = 0, two = 0, lanes = 1, one_thread = 0;

    while ((opt = getopt(argc, argv, "s:c:t:b:w:eT2P:1")) != -1) {
        switch (opt) {
        case 's': server = optarg; break;
        case 'c': client = optarg; break;
        case 't': seconds = atof(optarg); break;
        case 'b': bufsize = strtoull(optarg, NULL, 0); break;
        case 'w': window = strtoull(optarg, NULL, 0); break;
        case 'e': echo = 1; break;
        case 'T': threaded = 1; break;
        case '2': two = 1; break;
        case 'P': lanes = atoi(optarg); break;
        case '1': one_thread = 1; break;
        default: server = client = NULL; break;
        }
    }
    if ((server == NULL) == (client == NULL) || bufsize == 0 || bufsize > (1u << 30) ||
        window < bufsize || (two && !echo) || lanes < 1 || lanes > 64 ||
        (lanes > 1 && (!echo || two || threaded)) || (one_thread && lanes < 2)) {
        fprintf(stderr, "usage: agg_sockperf -s HOST:PORT [-e [-T] [-2] | -e -P K [-1]] | -c HOST:PORT "
                        "[-e [-T] [-2] | -e -P K (1-64) [-1]] [-t SEC] [-b BYTES (1 GiB at most)] [-w WINDOW >= BYTES]\n");
        return 2;
    }
    return server != NULL ? serve(server, bufsize, echo, threaded, two, lanes, one_thread)
                          : drive(client, seconds, bufsize, window, echo, threaded, two, lanes,
                                  one_thread);
}
