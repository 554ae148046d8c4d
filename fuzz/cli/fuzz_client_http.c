/*
 * fuzz_client_http.c - the built-in HTTP/1.1 transport reading arbitrary
 * answers: the input is what the "server" sends, fed through a socketpair
 * posing as a kept-alive connection; once buffered, once streamed.
 */
#include "client_int.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sink(void *ud, const char *d, size_t n)
{
    size_t *total = ud;
    *total += n;
    return *total > (1u << 20); /* stop a huge stream */
}

static void one(const uint8_t *data, size_t size, bool stream)
{
    cr_client *c = NULL;
    /* port 1 on loopback: a retry after a dead connection is refused at once */
    cr_client_opts o = {.server = "http://127.0.0.1:1", .timeout_ns = 1000000000};
    if (cr_client_new(&o, &c) < 0) {
        return;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        cr_client_free(c);
        return;
    }
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(sv[1], data + off, size - off);
        if (w <= 0) {
            break;
        }
        off += (size_t)w;
    }
    shutdown(sv[1], SHUT_WR);
    c->fd = sv[0];
    cr_client_res res;
    cr_client_res_init(&res);
    size_t total = 0;
    if (stream) {
        cr_client_stream(c, "/s", 0, 0, sink, &total, &res);
    } else {
        cr_client_request(c, "GET", "/x", NULL, 0, &res);
    }
    cr_client_res_fini(&res);
    cr_client_free(c);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 100000) { /* stays inside the socket buffer */
        return 0;
    }
    one(data, size, false);
    one(data, size, true);
    return 0;
}
