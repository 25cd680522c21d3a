/* The catch-up ceiling of this machine: a trivial HTTP/1.1 server that
 * answers every GET on a keep-alive connection with the whole of one file,
 * in pieces of 8 MiB, the way a catch-up read must: what serving a file's
 * bytes to a loopback reader costs when the server does nothing else. It
 * answers the headers a Durable Streams reader follows (Stream-Next-Offset,
 * Stream-Up-To-Date), so `sluice-bench --scenario catchup --read-path /`
 * reads it like a stream. One connection at a time, blocking sockets.
 *
 * Modes (what happens to each piece):
 *   memory    send it from one buffer read once at start (no file read):
 *             the loopback TCP ceiling for this reader
 *   read      pread into a buffer, send
 *   verify    pread, CRC32C over it (three independent lanes, as a
 *             hardware CRC library runs), send: what a server that checks
 *             stored bytes before serving them must do at least
 *   mmap      map the piece, fault it in (MADV_POPULATE_READ), CRC32C over
 *             the mapping, send from it, unmap: the copy into a buffer saved
 *   sendfile  sendfile(2) from the page cache, unchecked
 *   mapped    the whole file mapped and faulted in once at start (not
 *             timed), then CRC32C + send from the mapping: what a reread of
 *             a file kept mapped costs; a first read of each page pays what
 *             `mmap` pays
 *
 *   gcc -O2 -msse4.2 -o file_server bench/trivial/file_server.c
 *   ./file_server verify /path/to/file 4692
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <nmmintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blocking_net.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define PIECE (8u << 20)

enum mode { MEMORY, READ, VERIFY, MMAP, SENDFILE, MAPPED, MODES };

/* Three CRC32C chains over the thirds of p, so the CPU overlaps them. */
static uint32_t crc3(const uint8_t *p, size_t n) {
    size_t third = n / 3 / 8 * 8, i;
    uint64_t a = 0, b = 0, c = 0;
    for (i = 0; i + 8 <= third; i += 8) {
        uint64_t x, y, z;
        memcpy(&x, p + i, 8);
        memcpy(&y, p + third + i, 8);
        memcpy(&z, p + 2 * third + i, 8);
        a = _mm_crc32_u64(a, x);
        b = _mm_crc32_u64(b, y);
        c = _mm_crc32_u64(c, z);
    }
    for (i = 3 * third; i < n; i++)
        c = _mm_crc32_u8((uint32_t)c, p[i]);
    return (uint32_t)(a ^ b ^ c);
}

/* Reads one request head (any method; a body is not expected); 0 at EOF. */
static int read_head(int s) {
    char buf[8192];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t r = recv(s, buf + got, sizeof buf - got, 0);
        if (r <= 0)
            return 0;
        got += (size_t)r;
        if (memmem(buf, got, "\r\n\r\n", 4))
            return 1;
    }
    return 0;
}

/* The whole file, mapped in `mapped` mode. */
static uint8_t *whole;

static int serve_piece(int s, int fd, enum mode m, uint8_t *buf, off_t off, size_t n, volatile uint32_t *sink) {
    if (m == MEMORY)
        return send_all(s, buf, n);
    if (m == MAPPED) {
        *sink += crc3(whole + off, n);
        return send_all(s, whole + off, n);
    }
    if (m == SENDFILE) {
        while (n) {
            ssize_t w = sendfile(s, fd, &off, n);
            if (w <= 0)
                return -1;
            n -= (size_t)w;
        }
        return 0;
    }
    if (m == MMAP) {
        uint8_t *p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, off);
        if (p == MAP_FAILED)
            return -1;
        madvise(p, n, MADV_POPULATE_READ);
        *sink += crc3(p, n);
        int rc = send_all(s, p, n);
        munmap(p, n);
        return rc;
    }
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(fd, buf + got, n - got, off + (off_t)got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    if (m == VERIFY)
        *sink += crc3(buf, n);
    return send_all(s, buf, n);
}

int main(int argc, char **argv) {
    static const char *names[MODES] = {"memory", "read", "verify", "mmap", "sendfile", "mapped"};
    enum mode m = MODES;
    if (argc != 4)
        goto usage;
    for (int i = 0; i < MODES; i++)
        if (!strcmp(argv[1], names[i]))
            m = (enum mode)i;
    if (m == MODES)
        goto usage;
    int fd = open(argv[2], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        perror(argv[2]);
        return 1;
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(PIECE);
    if (m == MEMORY && pread(fd, buf, PIECE, 0) < 0) {
        perror("pread");
        return 1;
    }
    if (m == MAPPED) {
        whole = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (whole == MAP_FAILED || madvise(whole, len, MADV_POPULATE_READ) < 0) {
            perror("mmap");
            return 1;
        }
    }
    int ls = listen_loopback((uint16_t)atoi(argv[3]));
    volatile uint32_t sink = 0;
    for (;;) {
        int s = accept(ls, NULL, NULL);
        if (s < 0)
            continue;
        while (read_head(s)) {
            char head[256];
            int hl = snprintf(head, sizeof head,
                              "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                              "Stream-Next-Offset: %zu\r\nStream-Up-To-Date: true\r\nContent-Length: %zu\r\n\r\n",
                              len, len);
            int ok = send_all(s, head, (size_t)hl) == 0;
            for (size_t off = 0; ok && off < len; off += PIECE) {
                size_t n = len - off < PIECE ? len - off : PIECE;
                ok = serve_piece(s, fd, m, buf, (off_t)off, n, &sink) == 0;
            }
            if (!ok)
                break;
        }
        close(s);
    }
usage:
    fprintf(stderr, "usage: %s memory|read|verify|mmap|sendfile|mapped FILE PORT\n", argv[0]);
    return 2;
}
