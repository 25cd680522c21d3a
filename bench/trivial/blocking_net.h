/* Blocking loopback sockets for the ceiling servers (file_server.c,
 * ingest_server.c): a listener and a send of a whole buffer. */
#ifndef BLOCKING_NET_H
#define BLOCKING_NET_H

#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

/* A listening socket on 127.0.0.1:port; exits the process when it cannot. */
static int listen_loopback(uint16_t port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 64) < 0) {
        perror("listen");
        _exit(1);
    }
    return ls;
}

/* Sends all of p; -1 when the peer is gone. */
static int send_all(int s, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(s, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

#endif
