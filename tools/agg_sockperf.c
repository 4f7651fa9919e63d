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
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

static int serve(const char *addr, size_t bufsize)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd, fd, one = 1;
    uint64_t total = 0;
    char *buf = malloc(bufsize);
    ssize_t n;

    if (buf == NULL || resolve(addr, &ss, &len) != 0) {
        return 2;
    }
    lfd = socket(ss.ss_family, SOCK_STREAM, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&ss, len) != 0 || listen(lfd, 1) != 0) {
        perror("agg_sockperf: listen");
        return 2;
    }
    printf("listening\n");
    fflush(stdout);
    fd = accept(lfd, NULL, NULL);
    if (fd < 0) {
        perror("agg_sockperf: accept");
        return 2;
    }
    while ((n = recv(fd, buf, bufsize, 0)) > 0) {
        total += (uint64_t)n;
    }
    if (send(fd, &total, sizeof(total), 0) != (ssize_t)sizeof(total)) {
        perror("agg_sockperf: send");
    }
    printf("received %llu bytes\n", (unsigned long long)total);
    close(fd);
    close(lfd);
    free(buf);
    return 0;
}

static int drive(const char *addr, double seconds, size_t bufsize)
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint64_t sent = 0, got = 0;
    char *buf = calloc(1, bufsize);
    double t0, t1;
    int fd, one = 1, tries;

    if (buf == NULL || resolve(addr, &ss, &len) != 0) {
        return 2;
    }
    for (tries = 0;; ++tries) {
        fd = socket(ss.ss_family, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&ss, len) == 0) {
            break;
        }
        close(fd);
        if (tries > 100) {
            perror("agg_sockperf: connect");
            return 2;
        }
        usleep(20000);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    t0 = now();
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
    size_t bufsize = 4u << 20;
    int opt;

    while ((opt = getopt(argc, argv, "s:c:t:b:")) != -1) {
        switch (opt) {
        case 's': server = optarg; break;
        case 'c': client = optarg; break;
        case 't': seconds = atof(optarg); break;
        case 'b': bufsize = strtoull(optarg, NULL, 0); break;
        default: server = client = NULL; break;
        }
    }
    if ((server == NULL) == (client == NULL) || bufsize == 0) {
        fprintf(stderr, "usage: agg_sockperf -s HOST:PORT | -c HOST:PORT [-t SEC] [-b BYTES]\n");
        return 2;
    }
    return server != NULL ? serve(server, bufsize) : drive(client, seconds, bufsize);
}
