/*
 * fuzz_cli_render.c - the client's tables fed arbitrary server answers: the
 * input is parsed as JSON and its "items" (or the document itself) rendered
 * as jobs, nodes and generic tables.
 */
#include "cli_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc) {
        return 0;
    }
    FILE *out = fopen("/dev/null", "w");
    cli_ctx ctx = {.cmd = "fuzz", .out = out, .err = out, .now_ns = 1796013300000000000};
    const json_t *items = json_object_get(doc, "items");
    if (!items) {
        items = doc;
    }
    cr__cli_jobs_table(&ctx, items, false, out);
    cr__cli_jobs_table(&ctx, items, true, out);
    cr__cli_nodes_table(items, out);
    cr__cli_items_table(items, out);
    char buf[64];
    cr__cli_json_text(doc, buf, sizeof buf);
    cr__cli_print_json(&ctx, doc);
    fclose(out);
    json_decref(doc);
    return 0;
}
