/*
 * fuzz_json.c - the gateway's JSON inputs: its config file, the
 * controller's endpoints document and published key list, a client's
 * request body (its model and prompt prefix) and a replica's response tail
 * (the usage object). The first byte picks which; none may crash, leak or
 * accept an endpoint without an address and a port.
 */
#include "gw_int.h"

#include "cr_log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    cr_log_set_level(CR_LOG_OFF);
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] % 4 == 2) {
        char *s = malloc(len + 1);
        memcpy(s, text, len);
        s[len] = '\0';
        int64_t version = 0;
        gw_msg *m = NULL;
        if (gw_ctl_parse_keys(s, &version, &m) == 0) {
            gw_msg_free(m);
        }
        free(s);
        return 0;
    }
    if (data[0] % 4 == 0 && data[0] & 4) {
        char model[GW_MODEL_MAX];
        uint64_t prefix = 0, p = 0, q = 0;
        if (gw_body_model(text, len, model, sizeof model, &prefix) == 1 &&
            strlen(model) >= sizeof model) {
            abort();
        }
        (void)gw_usage_parse(text, len, &p, &q);
        return 0;
    }
    if (data[0] & 1) {
        gw_conf c;
        memset(&c, 0, sizeof c);
        if (gw_conf_load_text(text, len, "fuzz", &c) == 0) {
            for (size_t i = 0; i < c.service_count; i++) {
                for (size_t j = 0; j < c.services[i].endpoint_count; j++) {
                    if (c.services[i].endpoints[j].port == 0 ||
                        c.services[i].endpoints[j].host[0] == '\0') {
                        abort();
                    }
                    /* an endpoint's adapters are its service's */
                    size_t na = c.services[i].adapter_count;
                    if (na < 64 && (c.services[i].endpoints[j].adapters >> na) != 0) {
                        abort();
                    }
                }
            }
        }
        gw_conf_fini(&c);
    } else {
        char *s = malloc(len + 1);
        memcpy(s, text, len);
        s[len] = '\0';
        int64_t version = 0;
        gw_msg *m = NULL;
        if (gw_ctl_parse_endpoints("svc", s, &version, &m) == 0) {
            for (size_t i = 0; i < m->endpoint_count; i++) {
                if (m->endpoints[i].port == 0 || m->endpoints[i].host[0] == '\0') {
                    abort();
                }
            }
            gw_msg_free(m);
        }
        free(s);
    }
    return 0;
}
