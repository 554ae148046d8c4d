#include "cr_error.h"

const char *cr_strerror(int err)
{
    switch (err) {
    case CR_OK:
        return "ok";
#define CR__ERR_STR(name, msg)                                                                     \
    case CR_E##name:                                                                               \
        return msg;
        CR_ERRNO_MAP(CR__ERR_STR)
#undef CR__ERR_STR
    default:
        return "unknown error";
    }
}

const char *cr_errname(int err)
{
    switch (err) {
    case CR_OK:
        return "CR_OK";
#define CR__ERR_NAME(name, msg)                                                                    \
    case CR_E##name:                                                                               \
        return "CR_E" #name;
        CR_ERRNO_MAP(CR__ERR_NAME)
#undef CR__ERR_NAME
    default:
        return "CR_EUNKNOWN";
    }
}
