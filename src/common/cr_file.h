/*
 * cr_file.h - a whole file read into memory, bounded: the loaders of
 * catalogs, traces and cluster files all want the text of a file no larger
 * than some limit, NUL-terminated, with the reason when it cannot be had.
 * The caller words the message (its flag, its file and field).
 */
#ifndef CR_FILE_H
#define CR_FILE_H

#include <stddef.h>

/* Reads path into *out (returned new, NUL-terminated: free()) and its
 * length into *len. Returns 0; CR_EIO when the file cannot be opened or
 * read (errno says why); CR_ETOOBIG when it holds more than max_bytes.
 * *out and *len are untouched on failure. */
int cr_file_read(const char *path, size_t max_bytes, char **out, size_t *len);

#endif
