/*
 * fuzz_etcd_reply.c - what an etcd endpoint (or anything listening where
 * one was configured) can answer: the input as a range reply, a txn reply
 * and an error reply.
 */
#include "cr_etcd.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    cr_etcd_range_result r;
    int64_t rev = 0;
    if (cr__etcd_parse_range(body, size, &r, &rev) == 0) {
        for (size_t i = 0; i < r.n; i++) {
            if (strlen(r.kvs[i].key) > size || r.kvs[i].value_len > size) {
                abort(); /* decoded base64 is never longer than its text */
            }
        }
        cr_etcd_range_result_fini(&r);
    }
    cr_etcd_txn_result t;
    if (cr__etcd_parse_txn(body, size, &t) == 0) {
        cr_etcd_txn_result_fini(&t);
    }
    bool retry = false;
    (void)cr__etcd_parse_error(body, size, 400, &retry);
    return 0;
}
