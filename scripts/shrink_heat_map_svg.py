#!/usr/bin/env python3
"""Redraws a `y.y` heat map SVG written cell by cell (tint-cgt's `heat_map_svg` before it drew maps
wider than `HEAT_MAP_MAX_CELLS` = 96 positions as block means) as the means of k x k blocks, as
`heat_map_svg` now draws them.

For maps whose model is gone: the three `icl-paper` maps of 2026-11-29 were drawn on a lent GPU,
whose checkpoints did not come back, and each SVG was 4.9 MB (238 x 238 rectangles).

Each cell's value is recovered from its colour by inverting tint-cgt's `diverging` map
(-1 blue, 0 white, +1 red: a channel is round(255 (1 - |v|))), so to within 1/510. The block's mean
gets `diverging`'s colour. Its rectangle is the union of its cells' rectangles, which is where
plotters puts a rectangle from the block's first to its last position. The title gets
" (kxk block means)", as `heat_map_svg` writes it. Every other element is kept as it is.

Checked against `heat_map_svg` on 2026-11-29. The test matrix had 238 positions and values that
are multiples of 1/255, so the colours invert exactly. This script's output was byte-identical to
the block-mean map that `heat_map_svg` draws.

Usage: scripts/shrink_heat_map_svg.py IN.svg OUT.svg [MAX_CELLS=96]
"""
import math
import re
import sys

CELL = re.compile(
    r'<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)" opacity="1" fill="#([0-9A-F]{6})" stroke="none"/>'
)


def value_of(colour):
    r, g, b = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    if r == 255 and g == b:
        return 1.0 - g / 255.0
    if b == 255 and r == g:
        return -(1.0 - r / 255.0)
    raise ValueError(f"#{colour} is not a colour of the diverging map")


def colour_of(value):
    v = max(-1.0, min(1.0, value))
    fade = lambda t: int(math.floor(255.0 * (1.0 - t) + 0.5))  # Rust's f32::round for t in [0, 1]
    rgb = (255, fade(v), fade(v)) if v >= 0 else (fade(-v), fade(-v), 255)
    return "#%02X%02X%02X" % rgb


def main(source, target, max_cells=96):
    lines = open(source).read().split("\n")
    # The first rectangle is the white background; the cells follow it, row by row.
    cell_lines = [i for i, line in enumerate(lines) if CELL.fullmatch(line)][1:]
    n = math.isqrt(len(cell_lines))
    if n * n != len(cell_lines) or n == 0:
        sys.exit(f"{source}: {len(cell_lines)} cell rectangles, not n x n")
    block = -(-n // max_cells)
    if block == 1:
        sys.exit(f"{source}: {n} positions, within {max_cells}: nothing to shrink")
    cells = [CELL.fullmatch(lines[i]).groups() for i in cell_lines]
    side = -(-n // block)
    rects = []
    for row in range(side):
        for column in range(side):
            members = [
                cells[r * n + c]
                for r in range(row * block, min((row + 1) * block, n))
                for c in range(column * block, min((column + 1) * block, n))
            ]
            mean = sum(value_of(m[4]) for m in members) / len(members)
            x0 = min(int(m[0]) for m in members)
            y0 = min(int(m[1]) for m in members)
            x1 = max(int(m[0]) + int(m[2]) for m in members)
            y1 = max(int(m[1]) + int(m[3]) for m in members)
            rects.append(
                f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" opacity="1" '
                f'fill="{colour_of(mean)}" stroke="none"/>'
            )
    first = cell_lines[0]
    dropped = set(cell_lines)
    kept = [line for i, line in enumerate(lines) if i not in dropped]
    # The title is the first text element's text line.
    title = next(i for i, line in enumerate(kept) if line.startswith("<text")) + 1
    kept[title] = f"{kept[title]} ({block}x{block} block means)"
    out = kept[:first] + rects + kept[first:]
    with open(target, "w") as f:
        f.write("\n".join(out))
    print(f"{source}: {n} positions -> {side} x {side} blocks of {block}; {target}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:4]))
