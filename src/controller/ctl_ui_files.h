/*
 * ctl_ui_files.h - the dashboard's static files (ui/), embedded at build
 * time by scripts/embed.py into a generated ctl_ui_files.c.
 */
#ifndef CTL_UI_FILES_H
#define CTL_UI_FILES_H

#include <stddef.h>

typedef struct ctl_ui_file {
    const char *name;          /* base name: "index.html" */
    const char *type;          /* Content-Type */
    const unsigned char *data; /* bytes (NUL-terminated, not counted) */
    size_t len;
} ctl_ui_file;

/* Terminated by an entry with name NULL. */
extern const ctl_ui_file ctl_ui_files[];

#endif
