/*
 * nvenc.c - the NVENC Application Note's encode-rate table (cr_nvenc.h).
 * Transcribed from
 * https://docs.nvidia.com/video-technologies/video-codec-sdk/13.0/nvenc-application-note/index.html
 * section 4: measured on GeForce cards at their highest video clock
 * (GTX 1060 1708 MHz, RTX 8000 1950 MHz, RTX 3090 1950 MHz, RTX 4090
 * 2415 MHz; the note gives no Blackwell card or clock). Jetson Thor rows
 * are left out (no Thor in the catalog).
 */
#include "cr_nvenc.h"

#include "cr_error.h"

#include <string.h>

static const cr_nvenc_rate table[] = {
    {"Pascal", CR_CODEC_H264, 1, 1, 667},     {"Turing", CR_CODEC_H264, 1, 1, 855},
    {"Ampere", CR_CODEC_H264, 1, 1, 868},     {"Ada", CR_CODEC_H264, 1, 1, 910},
    {"Blackwell", CR_CODEC_H264, 1, 1, 977},  {"Pascal", CR_CODEC_H264, 1, 0, 692},
    {"Turing", CR_CODEC_H264, 1, 0, 833},     {"Ampere", CR_CODEC_H264, 1, 0, 846},
    {"Ada", CR_CODEC_H264, 1, 0, 885},        {"Blackwell", CR_CODEC_H264, 1, 0, 948},
    {"Pascal", CR_CODEC_H264, 3, 1, 649},     {"Turing", CR_CODEC_H264, 3, 1, 600},
    {"Ampere", CR_CODEC_H264, 3, 1, 613},     {"Ada", CR_CODEC_H264, 3, 1, 652},
    {"Blackwell", CR_CODEC_H264, 3, 1, 718},  {"Pascal", CR_CODEC_H264, 3, 0, 398},
    {"Turing", CR_CODEC_H264, 3, 0, 602},     {"Ampere", CR_CODEC_H264, 3, 0, 617},
    {"Ada", CR_CODEC_H264, 3, 0, 647},        {"Blackwell", CR_CODEC_H264, 3, 0, 708},
    {"Pascal", CR_CODEC_H264, 5, 1, 363},     {"Turing", CR_CODEC_H264, 5, 1, 271},
    {"Ampere", CR_CODEC_H264, 5, 1, 273},     {"Ada", CR_CODEC_H264, 5, 1, 291},
    {"Blackwell", CR_CODEC_H264, 5, 1, 323},  {"Pascal", CR_CODEC_H264, 5, 0, 327},
    {"Turing", CR_CODEC_H264, 5, 0, 264},     {"Ampere", CR_CODEC_H264, 5, 0, 266},
    {"Ada", CR_CODEC_H264, 5, 0, 283},        {"Blackwell", CR_CODEC_H264, 5, 0, 317},
    {"Pascal", CR_CODEC_H264, 7, 1, 321},     {"Turing", CR_CODEC_H264, 7, 1, 229},
    {"Ampere", CR_CODEC_H264, 7, 1, 231},     {"Ada", CR_CODEC_H264, 7, 1, 247},
    {"Blackwell", CR_CODEC_H264, 7, 1, 264},  {"Pascal", CR_CODEC_H264, 7, 0, 250},
    {"Turing", CR_CODEC_H264, 7, 0, 207},     {"Ampere", CR_CODEC_H264, 7, 0, 213},
    {"Ada", CR_CODEC_H264, 7, 0, 211},        {"Blackwell", CR_CODEC_H264, 7, 0, 227},
    {"Pascal", CR_CODEC_HEVC, 1, 1, 539},     {"Turing", CR_CODEC_HEVC, 1, 1, 932},
    {"Ampere", CR_CODEC_HEVC, 1, 1, 943},     {"Ada", CR_CODEC_HEVC, 1, 1, 1055},
    {"Blackwell", CR_CODEC_HEVC, 1, 1, 1134}, {"Pascal", CR_CODEC_HEVC, 1, 0, 506},
    {"Turing", CR_CODEC_HEVC, 1, 0, 920},     {"Ampere", CR_CODEC_HEVC, 1, 0, 939},
    {"Ada", CR_CODEC_HEVC, 1, 0, 1037},       {"Blackwell", CR_CODEC_HEVC, 1, 0, 1119},
    {"Pascal", CR_CODEC_HEVC, 3, 1, 442},     {"Turing", CR_CODEC_HEVC, 3, 1, 463},
    {"Ampere", CR_CODEC_HEVC, 3, 1, 467},     {"Ada", CR_CODEC_HEVC, 3, 1, 494},
    {"Blackwell", CR_CODEC_HEVC, 3, 1, 529},  {"Pascal", CR_CODEC_HEVC, 3, 0, 443},
    {"Turing", CR_CODEC_HEVC, 3, 0, 552},     {"Ampere", CR_CODEC_HEVC, 3, 0, 557},
    {"Ada", CR_CODEC_HEVC, 3, 0, 706},        {"Blackwell", CR_CODEC_HEVC, 3, 0, 947},
    {"Pascal", CR_CODEC_HEVC, 5, 1, 370},     {"Turing", CR_CODEC_HEVC, 5, 1, 305},
    {"Ampere", CR_CODEC_HEVC, 5, 1, 307},     {"Ada", CR_CODEC_HEVC, 5, 1, 343},
    {"Blackwell", CR_CODEC_HEVC, 5, 1, 506},  {"Pascal", CR_CODEC_HEVC, 5, 0, 371},
    {"Turing", CR_CODEC_HEVC, 5, 0, 334},     {"Ampere", CR_CODEC_HEVC, 5, 0, 335},
    {"Ada", CR_CODEC_HEVC, 5, 0, 411},        {"Blackwell", CR_CODEC_HEVC, 5, 0, 521},
    {"Pascal", CR_CODEC_HEVC, 7, 1, 345},     {"Turing", CR_CODEC_HEVC, 7, 1, 306},
    {"Ampere", CR_CODEC_HEVC, 7, 1, 308},     {"Ada", CR_CODEC_HEVC, 7, 1, 343},
    {"Blackwell", CR_CODEC_HEVC, 7, 1, 464},  {"Pascal", CR_CODEC_HEVC, 7, 0, 260},
    {"Turing", CR_CODEC_HEVC, 7, 0, 171},     {"Ampere", CR_CODEC_HEVC, 7, 0, 171},
    {"Ada", CR_CODEC_HEVC, 7, 0, 181},        {"Blackwell", CR_CODEC_HEVC, 7, 0, 181},
    {"Ada", CR_CODEC_AV1, 1, 1, 1090},        {"Blackwell", CR_CODEC_AV1, 1, 1, 1076},
    {"Ada", CR_CODEC_AV1, 1, 0, 741},         {"Blackwell", CR_CODEC_AV1, 1, 0, 957},
    {"Ada", CR_CODEC_AV1, 3, 1, 774},         {"Blackwell", CR_CODEC_AV1, 3, 1, 798},
    {"Ada", CR_CODEC_AV1, 3, 0, 549},         {"Blackwell", CR_CODEC_AV1, 3, 0, 678},
    {"Ada", CR_CODEC_AV1, 5, 1, 512},         {"Blackwell", CR_CODEC_AV1, 5, 1, 624},
    {"Ada", CR_CODEC_AV1, 5, 0, 440},         {"Blackwell", CR_CODEC_AV1, 5, 0, 552},
    {"Ada", CR_CODEC_AV1, 7, 1, 356},         {"Blackwell", CR_CODEC_AV1, 7, 1, 395},
    {"Ada", CR_CODEC_AV1, 7, 0, 323},         {"Blackwell", CR_CODEC_AV1, 7, 0, 401},
};

const cr_nvenc_rate *cr_nvenc_table(int *count)
{
    *count = (int)(sizeof table / sizeof table[0]);
    return table;
}

/* The note's family name for a catalog architecture string. GA100 and
 * GH100 carry no NVENC, so their "Ampere"/"Hopper" never reach here with
 * engines; the catalog's nvenc column decides that, not this table. */
static const char *family(const char *arch)
{
    static const char *const names[] = {"Pascal", "Turing", "Ampere", "Ada", "Blackwell"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strncmp(arch, names[i], strlen(names[i])) == 0) {
            return names[i];
        }
    }
    return NULL;
}

int cr_nvenc_fps(const char *arch, int codec, int preset, int cbr, double *fps)
{
    const char *fam = arch ? family(arch) : NULL;
    if (!fam) {
        return CR_ENOENT;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const cr_nvenc_rate *r = &table[i];
        if (r->codec == codec && r->preset == preset && r->cbr == (cbr != 0) &&
            strcmp(r->arch, fam) == 0) {
            *fps = r->fps;
            return 0;
        }
    }
    return CR_ENOENT;
}

static const char *const codec_names[] = {"none", "h264", "hevc", "av1"};

int cr_codec_parse(const char *s)
{
    for (int i = CR_CODEC_H264; i <= CR_CODEC_AV1; i++) {
        if (strcmp(s, codec_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

const char *cr_codec_name(int codec)
{
    return codec >= 0 && codec <= CR_CODEC_AV1 ? codec_names[codec] : "?";
}
