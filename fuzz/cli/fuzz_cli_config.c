/*
 * fuzz_cli_config.c - the client's outside input: the config file parser,
 * RFC 3339 times from the server, and flag parsing of arbitrary argv (the
 * input split on newlines).
 */
#include "cli_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const cli_opt opts[] = {
    {"gpus", CLI_INT, "N", "", NULL, 0, 4096, 0},    {"kind", CLI_STR, "K", "", "a|b", 0, 0, 0},
    {"time", CLI_DUR, "D", "", NULL, 0, 0, 't'},     {"env", CLI_LIST, "K=V", "", NULL, 0, 0, 'e'},
    {"params", CLI_COUNT, "N", "", NULL, 0, 0, 0},   {"w", CLI_F64, "W", "", NULL, 0, 10, 0},
    {"follow", CLI_BOOL, NULL, "", NULL, 0, 0, 'f'},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    FILE *devnull = fopen("/dev/null", "w");

    cli_config cfg;
    cr__cli_config_init(&cfg);
    cr__cli_config_parse(&cfg, "fuzz", text, devnull);
    cr__cli_config_fini(&cfg);

    int64_t t = 0;
    cr__cli_parse_rfc3339(text, &t);

    char *argv[64];
    int argc = 0;
    argv[argc++] = "fuzz";
    for (char *p = text; p && argc < 63;) {
        char *nl = strchr(p, '\n');
        if (nl) {
            *nl = '\0';
        }
        argv[argc++] = p;
        p = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;
    cli_args a;
    cr__cli_args_parse(&a, "fuzz", opts, sizeof opts / sizeof opts[0], size % 2, argc, argv,
                       devnull);
    cr__cli_args_fini(&a);

    fclose(devnull);
    free(text);
    return 0;
}
