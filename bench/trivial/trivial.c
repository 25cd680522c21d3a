/* The HTTP ceiling of this machine: a trivial HTTP/1.1 server that answers
 * every request (any method, any path, a Content-Length body read and
 * dropped) with `204 No Content`, on keep-alive connections. One thread per
 * core, each with its own SO_REUSEPORT listener and level-triggered epoll
 * instance: what a request costs when the server does nothing but parse its
 * head and answer. bench/trivial.sh builds and measures it with sluice-bench.
 *
 *   gcc -O2 -pthread -o trivial bench/trivial/trivial.c && ./trivial 4690 2
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 65536
#define MAX_CONNS 65536

static int port;
static const char answer[] = "HTTP/1.1 204 No Content\r\nStream-Next-Offset: 0\r\n\r\n";

struct conn {
    int fd;
    size_t have;
    char buf[BUF];
};

/* Bytes of the first whole request in c->buf (head and body), or 0. */
static size_t whole_request(const struct conn *c) {
    const char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head = (size_t)(end - c->buf) + 4, body = 0;
    for (const char *p = c->buf; p < end; p++) {
        if ((p == c->buf || p[-1] == '\n') && strncasecmp(p, "content-length:", 15) == 0) {
            body = strtoul(p + 15, NULL, 10);
            break;
        }
    }
    if (head + body > BUF) return (size_t)-1;
    return c->have >= head + body ? head + body : 0;
}

static void *serve(void *arg) {
    (void)arg;
    int one = 1;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096)) {
        perror("listen");
        exit(1);
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            ssize_t got = read(c->fd, c->buf + c->have, BUF - c->have);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                close(c->fd);
                free(c);
                continue;
            }
            c->have += (size_t)got;
            size_t len;
            while ((len = whole_request(c)) != 0) {
                if (len == (size_t)-1) {
                    close(c->fd);
                    free(c);
                    c = NULL;
                    break;
                }
                if (write(c->fd, answer, sizeof answer - 1) < 0) break;
                memmove(c->buf, c->buf + len, c->have - len);
                c->have -= len;
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: trivial PORT THREADS\n");
        return 2;
    }
    port = atoi(argv[1]);
    int threads = atoi(argv[2]);
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, serve, NULL);
    pthread_join(t[0], NULL);
    return 0;
}
