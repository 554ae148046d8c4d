/*
 * fuzz_http.c - the gateway's HTTP head parser and chunked scanner on
 * arbitrary bytes: as a request, as a response, and as a chunked body fed
 * whole and in two pieces (both must agree on where the body ends). The
 * parsed fields must stay inside the input.
 */
#include "cr_http_parse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_inside(const cr_http_msg *m, const char *buf, size_t len)
{
    for (size_t i = 0; i < m->header_count; i++) {
        const cr_http_header *h = &m->headers[i];
        if (h->name < buf || h->name + h->name_len > buf + len || h->value < buf ||
            h->value + h->value_len > buf + len) {
            abort();
        }
    }
    if (m->head_len > len) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, so reads past the end are caught by the sanitizers. */
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    cr_http_msg m;
    int rc = cr_http_parse_request(buf, size, &m);
    if (rc > 0) {
        check_inside(&m, buf, size);
        if ((size_t)rc != m.head_len) {
            abort();
        }
    }
    rc = cr_http_parse_response(buf, size, &m);
    if (rc > 0) {
        check_inside(&m, buf, size);
    }
    cr_http_chunked a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    size_t used_a = 0, used_b1 = 0, used_b2 = 0;
    int ra = cr_http_chunked_scan(&a, buf, size, &used_a);
    size_t cut = size / 2;
    int rb = cr_http_chunked_scan(&b, buf, cut, &used_b1);
    if (rb == 0) {
        rb = cr_http_chunked_scan(&b, buf + cut, size - cut, &used_b2);
        used_b1 += used_b2;
    }
    if (ra == 1 && (rb != 1 || used_a != used_b1)) {
        abort();
    }
    if (ra == 0 && rb == 1) {
        abort();
    }
    if (used_a > size) {
        abort();
    }
    free(buf);
    return 0;
}
