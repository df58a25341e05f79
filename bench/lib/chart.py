"""bench/lib/chart.py: bar charts written straight to PNG with the standard
library only (zlib + struct), because matplotlib is not on these machines.
A Canvas holds RGB pixels; text is a 5x7 bitmap font (upper case, digits and
a little punctuation), scaled by whole pixels.
"""
import struct
import zlib

# Classic 5x7 font, column-major: one byte per column, bit 0 the top row.
_FONT = {
    "0": (0x3E, 0x51, 0x49, 0x45, 0x3E), "1": (0x00, 0x42, 0x7F, 0x40, 0x00),
    "2": (0x42, 0x61, 0x51, 0x49, 0x46), "3": (0x21, 0x41, 0x45, 0x4B, 0x31),
    "4": (0x18, 0x14, 0x12, 0x7F, 0x10), "5": (0x27, 0x45, 0x45, 0x45, 0x39),
    "6": (0x3C, 0x4A, 0x49, 0x49, 0x30), "7": (0x01, 0x71, 0x09, 0x05, 0x03),
    "8": (0x36, 0x49, 0x49, 0x49, 0x36), "9": (0x06, 0x49, 0x49, 0x29, 0x1E),
    "A": (0x7E, 0x11, 0x11, 0x11, 0x7E), "B": (0x7F, 0x49, 0x49, 0x49, 0x36),
    "C": (0x3E, 0x41, 0x41, 0x41, 0x22), "D": (0x7F, 0x41, 0x41, 0x22, 0x1C),
    "E": (0x7F, 0x49, 0x49, 0x49, 0x41), "F": (0x7F, 0x09, 0x09, 0x09, 0x01),
    "G": (0x3E, 0x41, 0x49, 0x49, 0x7A), "H": (0x7F, 0x08, 0x08, 0x08, 0x7F),
    "I": (0x00, 0x41, 0x7F, 0x41, 0x00), "J": (0x20, 0x40, 0x41, 0x3F, 0x01),
    "K": (0x7F, 0x08, 0x14, 0x22, 0x41), "L": (0x7F, 0x40, 0x40, 0x40, 0x40),
    "M": (0x7F, 0x02, 0x0C, 0x02, 0x7F), "N": (0x7F, 0x04, 0x08, 0x10, 0x7F),
    "O": (0x3E, 0x41, 0x41, 0x41, 0x3E), "P": (0x7F, 0x09, 0x09, 0x09, 0x06),
    "Q": (0x3E, 0x41, 0x51, 0x21, 0x5E), "R": (0x7F, 0x09, 0x19, 0x29, 0x46),
    "S": (0x46, 0x49, 0x49, 0x49, 0x31), "T": (0x01, 0x01, 0x7F, 0x01, 0x01),
    "U": (0x3F, 0x40, 0x40, 0x40, 0x3F), "V": (0x1F, 0x20, 0x40, 0x20, 0x1F),
    "W": (0x3F, 0x40, 0x38, 0x40, 0x3F), "X": (0x63, 0x14, 0x08, 0x14, 0x63),
    "Y": (0x07, 0x08, 0x70, 0x08, 0x07), "Z": (0x61, 0x51, 0x49, 0x45, 0x43),
    " ": (0, 0, 0, 0, 0), ".": (0x00, 0x60, 0x60, 0x00, 0x00),
    ",": (0x00, 0x50, 0x30, 0x00, 0x00), ":": (0x00, 0x36, 0x36, 0x00, 0x00),
    "-": (0x08, 0x08, 0x08, 0x08, 0x08), "/": (0x20, 0x10, 0x08, 0x04, 0x02),
    "(": (0x00, 0x1C, 0x22, 0x41, 0x00), ")": (0x00, 0x41, 0x22, 0x1C, 0x00),
    "%": (0x23, 0x13, 0x08, 0x64, 0x62), "=": (0x14, 0x14, 0x14, 0x14, 0x14),
    "+": (0x08, 0x08, 0x3E, 0x08, 0x08), "<": (0x08, 0x14, 0x22, 0x41, 0x00),
    ">": (0x00, 0x41, 0x22, 0x14, 0x08), "_": (0x40, 0x40, 0x40, 0x40, 0x40),
    "*": (0x14, 0x08, 0x3E, 0x08, 0x14), "#": (0x14, 0x7F, 0x14, 0x7F, 0x14),
    "?": (0x02, 0x01, 0x51, 0x09, 0x06), ";": (0x00, 0x56, 0x36, 0x00, 0x00), "'": (0x00, 0x00, 0x07, 0x00, 0x00),
}

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
GREY = (200, 200, 200)
DARK = (90, 90, 90)
PALETTE = [(66, 114, 196), (237, 125, 49), (112, 173, 71), (165, 105, 189),
           (91, 155, 213), (255, 192, 0), (158, 72, 14), (99, 99, 99)]


class Canvas:
    def __init__(self, w, h, bg=WHITE):
        self.w, self.h = w, h
        self.px = [bytearray(bytes(bg) * w) for _ in range(h)]

    def rect(self, x0, y0, x1, y1, color):
        x0, x1 = max(0, int(min(x0, x1))), min(self.w, int(max(x0, x1)))
        y0, y1 = max(0, int(min(y0, y1))), min(self.h, int(max(y0, y1)))
        if x1 <= x0:
            return
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            self.px[y][3 * x0:3 * x1] = row

    def hline(self, x0, x1, y, color):
        self.rect(x0, y, x1, y + 1, color)

    def vline(self, x, y0, y1, color):
        self.rect(x, y0, x + 1, y1, color)

    def text_width(self, s, scale=1):
        return len(s) * 6 * scale - scale

    def text(self, x, y, s, color=BLACK, scale=1, anchor="left"):
        s = s.upper()
        if anchor == "center":
            x -= self.text_width(s, scale) // 2
        elif anchor == "right":
            x -= self.text_width(s, scale)
        for ch in s:
            cols = _FONT.get(ch, _FONT["?"])
            for cx, bits in enumerate(cols):
                for cy in range(7):
                    if bits >> cy & 1:
                        self.rect(x + cx * scale, y + cy * scale,
                                  x + (cx + 1) * scale, y + (cy + 1) * scale, color)
            x += 6 * scale

    def png(self):
        raw = b"".join(b"\x00" + bytes(r) for r in self.px)

        def chunk(tag, data):
            c = tag + data
            return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _nice_max(v):
    if v <= 0:
        return 1.0
    m = 10 ** len(str(int(v))) / 10
    for f in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if f * m >= v:
            return f * m
    return 10 * m


def _fmt(v):
    if v is None:
        return "N/A"
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.2f" % v


def bar_panel(c, x, y, w, h, title, groups, series, values, labels=None, note=None):
    """groups: category names; series: series names; values[g][s]: number or
    None; labels[g][s]: text above the bar (default the value)."""
    c.rect(x, y, x + w, y + h, WHITE)
    c.text(x + 10, y + 8, title, BLACK, 2)
    if note:
        c.text(x + 10, y + 28, note, DARK, 1)
    top, bottom, left, right = y + 48, y + h - 50, x + 60, x + w - 15
    vmax = _nice_max(max([v for row in values for v in row if v is not None] or [1]) * 1.12)
    for i in range(5):
        gy = bottom - (bottom - top) * i / 4
        c.hline(left, right, int(gy), GREY)
        c.text(left - 6, int(gy) - 3, _fmt(vmax * i / 4), DARK, 1, "right")
    c.vline(left, top, bottom + 1, DARK)
    c.hline(left, right, bottom, DARK)
    ng, ns = len(groups), len(series)
    gw = (right - left) / max(ng, 1)
    bw = max(4, min(60, (gw - 16) / max(ns, 1)))
    for gi, g in enumerate(groups):
        gx = left + gi * gw + (gw - bw * ns) / 2
        for si in range(ns):
            v = values[gi][si]
            bx = gx + si * bw
            if v is None:
                c.text(int(bx + bw / 2), bottom - 12, "N/A", DARK, 1, "center")
                continue
            by = bottom - (bottom - top) * v / vmax
            c.rect(bx + 1, by, bx + bw - 1, bottom, PALETTE[si % len(PALETTE)])
            lab = labels[gi][si] if labels and labels[gi][si] is not None else _fmt(v)
            c.text(int(bx + bw / 2), int(by) - 10, lab, BLACK, 1, "center")
        lines = g.split("\n")
        for li, line in enumerate(lines):
            c.text(int(left + gi * gw + gw / 2), bottom + 8 + 10 * li, line, BLACK, 1, "center")
    if ns > 1:  # legend, top right
        lx = right - sum(14 + c.text_width(s.upper()) + 20 for s in series)
        for si, s in enumerate(series):
            c.rect(lx, y + 10, lx + 10, y + 20, PALETTE[si % len(PALETTE)])
            c.text(lx + 14, y + 11, s, BLACK, 1)
            lx += 14 + c.text_width(s.upper()) + 20
