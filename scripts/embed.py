#!/usr/bin/env python3
"""embed.py OUT.c FILE... - the dashboard's static files as a C table.

Each FILE becomes one ctl_ui_file entry named by its base name, with its
bytes as an array (so the binary serves them installed or from the build
tree alike) and a content type from its extension.
"""
import os
import sys

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def main():
    out, files = sys.argv[1], sys.argv[2:]
    lines = ['#include "ctl_ui_files.h"', ""]
    entries = []
    for i, path in enumerate(files):
        name = os.path.basename(path)
        ext = os.path.splitext(name)[1]
        if ext not in TYPES:
            sys.exit("embed.py: %s: unknown extension %s" % (path, ext))
        with open(path, "rb") as f:
            data = f.read()
        lines.append("static const unsigned char f%d[] = {" % i)
        for k in range(0, len(data), 16):
            lines.append("    " + "".join("%d," % b for b in data[k:k + 16]))
        lines.append("    0};")
        entries.append('    {"%s", "%s", f%d, %d},' % (name, TYPES[ext], i, len(data)))
    lines.append("const ctl_ui_file ctl_ui_files[] = {")
    lines.extend(entries)
    lines.append("    {0, 0, 0, 0},")
    lines.append("};")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
