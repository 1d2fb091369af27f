"""Small real videos for the perception tests, written with PyAV: frame i of a flat gray of level `step * i`, so a
decoded frame identifies itself."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np


def write_gray_video(path: Path, frames: int, step: int, **codec: int) -> Path:
    """A 64x48 mpeg4 video at 10 fps of `frames` flat gray frames (frame i at level `step * i`) written to `path`;
    `codec` sets options of the codec context (gop_size, qmin, qmax) before the first frame."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for name, value in codec.items():
            setattr(stream.codec_context, name, value)
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), step * i, dtype=np.uint8), format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, 10)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path
