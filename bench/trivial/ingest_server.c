/* The durable-append ceiling of this machine: a trivial HTTP/1.1 server that
 * appends every POST body to one file (preallocated and zero-filled, or
 * growing) and answers once the bytes are durable, the way a Durable Streams append must. It
 * speaks what `sluice-bench --scenario catchup` uses (PUT answers 201, POST
 * appends and answers 204 with Stream-Next-Offset, GET returns the file's
 * bytes so far with Stream-Up-To-Date), so the same client fills it, sluice
 * and the Rust peer. One blocking thread per connection: appends on
 * different connections reach the disk concurrently, nothing is batched.
 *
 * Modes (how each append is made durable before its answer):
 *   dsync      one O_DIRECT | O_DSYNC write of the body, padded to 4 KiB
 *              blocks, at the next block (a journal's commit of one record)
 *   fdatasync  a buffered pwrite of the body at the next byte, then
 *              fdatasync(2) (a write-ahead log on a buffered file)
 *   none       a buffered pwrite only (not durable: the copy's cost alone)
 *   grow       as fdatasync, into a file that starts empty: each sync also
 *              allocates the blocks the append took (a log on a growing
 *              file, as a sustained fill needs once no space is prepared)
 *
 * DEPTH (optional, default: no limit) caps the durable writes in flight at
 * once (a semaphore around each append's write and sync): 1 is one commit
 * at a time, as a journal with one commit in flight.
 *
 *   gcc -O2 -pthread -o ingest_server bench/trivial/ingest_server.c
 *   ./ingest_server dsync /path/to/file 2147483648 4694 [DEPTH]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blocking_net.h"

#define BLOCK 4096
#define HEAD_MAX 8192
#define BODY_MAX (64u << 20)

enum mode { DSYNC, FDATASYNC, NONE, GROW, MODES };

static enum mode mode;
static int fd;          /* written by appends */
static int read_fd;     /* buffered, for GET */
static uint64_t size;   /* bytes the file may hold */
static _Atomic uint64_t next_at;  /* where the next append goes */
static _Atomic uint64_t stored;   /* body bytes acknowledged */
static sem_t depth;               /* durable writes that may be in flight */

static int answer(int s, const char *status, uint64_t next, const char *extra) {
    char head[256];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nStream-Next-Offset: %llu\r\n%sContent-Length: 0\r\n\r\n", status,
                     (unsigned long long)next, extra);
    return send_all(s, head, (size_t)n);
}

static int durable_append(const uint8_t *body, size_t n);

/* Makes `body` durable per the mode, within the depth limit. */
static int append(const uint8_t *body, size_t n) {
    sem_wait(&depth);
    int rc = durable_append(body, n);
    sem_post(&depth);
    return rc;
}

static int durable_append(const uint8_t *body, size_t n) {
    if (mode == DSYNC) {
        size_t padded = (n + BLOCK - 1) / BLOCK * BLOCK;
        uint64_t at = atomic_fetch_add(&next_at, padded);
        if (at + padded > size)
            return -1;
        if (pwrite(fd, body, padded, (off_t)at) != (ssize_t)padded)
            return -1;
    } else {
        uint64_t at = atomic_fetch_add(&next_at, n);
        if (at + n > size || pwrite(fd, body, n, (off_t)at) != (ssize_t)n)
            return -1;
        if ((mode == FDATASYNC || mode == GROW) && fdatasync(fd) < 0)
            return -1;
    }
    atomic_fetch_add(&stored, n);
    return 0;
}

/* Sends the bytes stored so far, read through `buf` (BODY_MAX bytes). */
static int serve_get(int s, uint8_t *buf) {
    uint64_t len = mode == DSYNC ? atomic_load(&next_at) : atomic_load(&stored);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\nStream-Next-Offset: %llu\r\nStream-Up-To-Date: true\r\nContent-Length: %llu\r\n\r\n",
                      (unsigned long long)len, (unsigned long long)len);
    if (send_all(s, head, (size_t)hl) < 0)
        return -1;
    for (uint64_t at = 0; at < len;) {
        size_t n = len - at < BODY_MAX ? (size_t)(len - at) : BODY_MAX;
        if (pread(read_fd, buf, n, (off_t)at) != (ssize_t)n || send_all(s, buf, n) < 0)
            return -1;
        at += n;
    }
    return 0;
}

static void *serve(void *arg) {
    int s = (int)(intptr_t)arg;
    char head[HEAD_MAX];
    uint8_t *body = aligned_alloc(BLOCK, BODY_MAX);
    size_t got = 0;
    for (;;) {
        char *end;
        while (!(end = memmem(head, got, "\r\n\r\n", 4))) {
            ssize_t r = got < sizeof head ? recv(s, head + got, sizeof head - got, 0) : -1;
            if (r <= 0)
                goto out;
            got += (size_t)r;
        }
        size_t head_len = (size_t)(end - head) + 4, len = 0;
        for (char *p = head; p < end; p++)
            if (!strncasecmp(p, "\r\ncontent-length:", 17))
                len = strtoull(p + 17, NULL, 10);
        if (len > BODY_MAX)
            goto out;
        int post = !strncmp(head, "POST ", 5), get = !strncmp(head, "GET ", 4);
        size_t have = got - head_len < len ? got - head_len : len;
        memcpy(body, head + head_len, have);
        size_t rest = got - head_len - have;
        memmove(head, head + head_len + have, rest);
        got = rest;
        while (have < len) {
            ssize_t r = recv(s, body + have, len - have, 0);
            if (r <= 0)
                goto out;
            have += (size_t)r;
        }
        memset(body + len, 0, (len + BLOCK - 1) / BLOCK * BLOCK - len);
        int rc;
        if (post)
            rc = append(body, len) < 0 ? answer(s, "507 Insufficient Storage", 0, "")
                                       : answer(s, "204 No Content", atomic_load(&stored), "");
        else if (get)
            rc = serve_get(s, body);
        else
            rc = answer(s, "201 Created", 0, "Content-Type: application/octet-stream\r\n");
        if (rc < 0)
            break;
    }
out:
    free(body);
    close(s);
    return NULL;
}

int main(int argc, char **argv) {
    static const char *names[MODES] = {"dsync", "fdatasync", "none", "grow"};
    mode = MODES;
    if (argc != 5 && argc != 6)
        goto usage;
    if (sem_init(&depth, 0, argc == 6 ? (unsigned)atoi(argv[5]) : 1u << 20) != 0 || (argc == 6 && atoi(argv[5]) < 1))
        goto usage;
    for (int i = 0; i < MODES; i++)
        if (!strcmp(argv[1], names[i]))
            mode = (enum mode)i;
    size = strtoull(argv[3], NULL, 10) / BLOCK * BLOCK;
    if (mode == MODES || size == 0)
        goto usage;
    /* Zero-filled and synced first (but in grow mode), so an append
     * rewrites written blocks and its sync carries no block allocation ... */
    int z = open(argv[2], O_CREAT | O_TRUNC | O_WRONLY, 0644);
    static uint8_t zeros[1 << 20];
    for (uint64_t at = 0; z >= 0 && mode != GROW && at < size; at += sizeof zeros)
        if (pwrite(z, zeros, size - at < sizeof zeros ? size - at : sizeof zeros, (off_t)at) < 0) {
            perror("zero-fill");
            return 1;
        }
    /* ... and out of the page cache, so a buffered append pays for fresh
     * pages as a log's new bytes do. */
    if (z < 0 || fsync(z) < 0 || posix_fadvise(z, 0, 0, POSIX_FADV_DONTNEED) != 0 || close(z) < 0) {
        perror(argv[2]);
        return 1;
    }
    fd = open(argv[2], O_WRONLY | (mode == DSYNC ? O_DIRECT | O_DSYNC : 0));
    read_fd = open(argv[2], O_RDONLY);
    if (fd < 0 || read_fd < 0) {
        perror(argv[2]);
        return 1;
    }
    int ls = listen_loopback((uint16_t)atoi(argv[4]));
    for (;;) {
        int s = accept(ls, NULL, NULL);
        pthread_t t;
        if (s >= 0 && pthread_create(&t, NULL, serve, (void *)(intptr_t)s) == 0)
            pthread_detach(t);
    }
usage:
    fprintf(stderr, "usage: %s dsync|fdatasync|none|grow FILE SIZE-BYTES PORT [DEPTH]\n", argv[0]);
    return 2;
}
