/* Fuzz target: the price table CSV parser (--prices FILE). */
#include "cr_catalog.h"
#include "cr_price.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char cat_text[] = "model,alias,memory_gb,mem_bw_gbs\n"
                                   "H100 SXM,h100,80,3350\nL40S,l40s,48,864\n";
    cr_catalog *c = NULL;
    cr_prices *p = NULL;
    char err[256];
    if (cr_catalog_parse(cat_text, strlen(cat_text), "cat", &c, err, sizeof err) != 0) {
        return 0;
    }
    if (cr_prices_parse((const char *)data, size, "fuzz.csv", c, &p, err, sizeof err) == 0) {
        (void)cr_prices_get(p, cr_catalog_at(c, 0));
        cr_prices_free(p);
    }
    cr_catalog_free(c);
    return 0;
}
