"""How the console shows values: bytes in human units, times, record keys and values as text, JSON or hex, and
the lag chart's geometry. Everything returns plain strings or numbers; the templates escape them (record keys,
values, headers and client ids are whatever clients sent)."""
from __future__ import annotations

import datetime
import json

from ....protocol import API_KEYS
from ....protocol.error_codes import ErrorCode
from ...faults import api_name

FORMATS = ("text", "json", "hex")
_HEX_BYTES_PER_LINE = 16
_SHOWN_BYTES = 64 * 1024  # a longer value is cut there (the page says so)
# what the fault forms suggest as their fields are typed
API_NAMES = tuple(sorted(api_name(key) for key in API_KEYS))
ERROR_NAMES = tuple(sorted(code.name for code in ErrorCode if code is not ErrorCode.NONE))


def human_bytes(count: int | None) -> str:
    """1536 -> '1.5 KiB' (binary units, as `du -h`)."""
    if count is None:
        return "-"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"  # not reached


def time_text(time_ms: int | None) -> str:
    """Epoch milliseconds as UTC ISO 8601 with milliseconds ('-' for none, or Kafka's -1 'no timestamp')."""
    if time_ms is None or time_ms < 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(time_ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{time_ms % 1000:03d} UTC"


def parse_time(text: str) -> int:
    """Epoch milliseconds from a number of ms or an ISO 8601 time (no zone: UTC); ValueError with the reason."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace(" ", "T").removesuffix("UTC").strip())
    except ValueError:
        raise ValueError(f"timestamp {text!r} is neither epoch milliseconds nor an ISO 8601 time "
                         "like 2026-01-31T13:45:00") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def show_bytes(data: bytes | None, fmt: str, *, say_not_json: bool = True) -> dict:
    """A key, value or header value for the page: {"null": bool, "text": str, "note": str} in `fmt` (JSON that
    does not parse is shown as text, with a note unless `say_not_json` is false)."""
    if data is None:
        return {"null": True, "text": "null", "note": ""}
    shown, note = data[:_SHOWN_BYTES], ""
    if len(data) > _SHOWN_BYTES:
        note = f"first {human_bytes(_SHOWN_BYTES)} of {human_bytes(len(data))}"
    if fmt == "hex":
        return {"null": False, "text": _hex_dump(shown), "note": note}
    text = shown.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            pretty = json.dumps(json.loads(data), indent=2, ensure_ascii=False)
            return {"null": False, "text": pretty[:_SHOWN_BYTES], "note": note}  # cut as the text is
        except (UnicodeDecodeError, ValueError, RecursionError):
            if say_not_json:
                note = "not JSON; shown as text" + (f", {note}" if note else "")
    if "\ufffd" in text and "\ufffd".encode() not in shown:
        note = "not UTF-8; try hex" + (f", {note}" if note else "")
    return {"null": False, "text": text, "note": note}


def _hex_dump(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), _HEX_BYTES_PER_LINE):
        chunk = data[start:start + _HEX_BYTES_PER_LINE]
        printable = "".join(chr(byte) if 32 <= byte < 127 else "." for byte in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<47}  {printable}")
    return "\n".join(lines)


def clock_text(time_ms: int | None) -> str:
    """Epoch milliseconds as the UTC time of day with milliseconds (the request log's column)."""
    return "-" if time_ms is None or time_ms < 0 else time_text(time_ms)[11:]


def lag_chart(points: list[tuple[int, int]], now_ms: int, window_ms: int, *, width: int = 640,
              height: int = 160) -> dict:
    """The lag chart's geometry: an SVG polyline (x: time up to now, y: lag from 0 at the bottom to the largest
    lag seen at the top), with the labels the axes need. The x axis spans the samples kept (at least a minute, at
    most `window_ms`), so that a young group's first minutes are not squeezed into the right edge."""
    margin_left, margin_bottom, top = 56, 20, 8
    plot_w, plot_h = width - margin_left - 8, height - margin_bottom - top
    top_lag = max((lag for _, lag in points), default=0) or 1
    span_ms = min(max(now_ms - points[0][0], 60_000), window_ms) if points else window_ms
    start_ms = now_ms - span_ms
    coordinates = []
    for time_ms, lag in points:
        x = margin_left + plot_w * min(max(time_ms - start_ms, 0), span_ms) / span_ms
        y = top + plot_h * (1 - lag / top_lag)
        coordinates.append(f"{x:.1f},{y:.1f}")
    return {"width": width, "height": height, "left": margin_left, "top": top, "bottom": top + plot_h,
            "right": margin_left + plot_w, "polyline": " ".join(coordinates), "top_lag": top_lag,
            "span": _duration(span_ms), "window": _duration(window_ms),
            "last_lag": points[-1][1] if points else None}


def _duration(ms: int) -> str:
    seconds = round(ms / 1000)
    return f"{seconds} s" if seconds < 120 else f"{round(seconds / 60)} min"
