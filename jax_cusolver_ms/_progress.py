"""A terminal progress bar: tqdm when importable, else a one-line bar on stderr."""
from __future__ import annotations

import sys
import time


class _LineBar:
    """What tqdm would show, without tqdm: `desc [#####.....] 12/40 postfix`, redrawn in place
    on a terminal and printed every 10% otherwise (logs stay short)."""

    def __init__(self, total: int, desc: str, stream):
        self.total, self.desc, self.stream, self.count = max(total, 1), desc, stream, 0
        self.started = time.perf_counter()
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self._last_decile = -1

    def update(self, count: int = 1):
        self.count += count
        self._draw()

    def set_postfix_str(self, text: str):
        self.postfix = text

    def _draw(self):
        done = self.count / self.total
        decile = int(done * 10)
        if not self.tty and decile == self._last_decile and self.count != self.total:
            return
        self._last_decile = decile
        width = 30
        bar = "#" * int(done * width) + "." * (width - int(done * width))
        line = (f"{self.desc} [{bar}] {self.count}/{self.total} "
                f"{time.perf_counter() - self.started:.0f}s {getattr(self, 'postfix', '')}")
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def progress(total: int, desc: str, stream=None):
    """An object with update(n), set_postfix_str(text) and close()."""
    stream = stream or sys.stderr
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _LineBar(total, desc, stream)
    return tqdm(total=total, desc=desc, file=stream, dynamic_ncols=True)
