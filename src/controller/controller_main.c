#include "cr_controller.h"

#include <stdio.h>

int cr_controller_main(int argc, char **argv)
{
    (void)argc;
    fprintf(stderr, "corral %s: not built yet\n", argv[0]);
    return 2;
}
