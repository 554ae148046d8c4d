/*
 * cr_nvenc.h - NVENC encode rates per engine, from NVIDIA's NVENC
 * Application Note (Video Codec SDK 13.0, section 4 "NVENC Performance"):
 * frames per second one NVENC engine encodes at 1920x1080, YUV 4:2:0,
 * 8-bit, per architecture, codec, preset and rate control. The same
 * numbers, each with its source, are in data/gpus/nvenc.csv; the model
 * test checks the two agree.
 */
#ifndef CR_NVENC_H
#define CR_NVENC_H

enum cr_codec { CR_CODEC_NONE = 0, CR_CODEC_H264, CR_CODEC_HEVC, CR_CODEC_AV1 };

#define CR_CODEC_VALUES  "h264|hevc|av1"
#define CR_PRESET_VALUES "p1|p3|p5|p7"
#define CR_RC_VALUES     "cbr|vbr"

/* One table row. rc: 1 CBR (low-latency tuning), 0 VBR (high quality). */
typedef struct cr_nvenc_rate {
    const char *arch; /* "Pascal", "Turing", "Ampere", "Ada", "Blackwell" */
    int codec;        /* enum cr_codec */
    int preset;       /* 1, 3, 5 or 7 (P1 fastest ... P7 best quality) */
    int cbr;
    int fps; /* 1080p frames/s per NVENC engine */
} cr_nvenc_rate;

/* The whole table; *count set. */
const cr_nvenc_rate *cr_nvenc_table(int *count);

/* Per-engine 1080p fps for a catalog architecture string ("Ada Lovelace
 * (AD104)", "Ampere (GA102)", "Turing (TU104)"): 0 and *fps set; CR_ENOENT
 * when the note has no row (Volta, Kepler, other vendors, AV1 before Ada). */
int cr_nvenc_fps(const char *arch, int codec, int preset, int cbr, double *fps);

/* "h264" -> CR_CODEC_H264 ...; -1 when unknown. */
int cr_codec_parse(const char *s);
const char *cr_codec_name(int codec);

#endif
