"""Numbers and text as a person reads them (docs/report.md, "Numbers in text"): three
significant digits below 1,000, whole numbers above, never e-notation. No plotting imports, so
the page can use it without matplotlib."""
import math


def _finite(value):
    """The value as a float, or None for null, text, a flag, NaN and infinity."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def readable(value, unit=""):
    value = _finite(value)
    if value is None:
        return "n/a"
    if value == 0:
        text = "0"
    elif abs(value) >= 1000:
        text = f"{value:,.0f}"
    else:
        digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
        text = f"{value:.{digits}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}".rstrip()


def duration(seconds):
    """Seconds in the unit that keeps three significant digits readable: s, ms or us."""
    seconds = _finite(seconds)
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if abs(seconds) >= scale:
            return readable(seconds / scale, unit)
    return readable(seconds / 1e-6, "us")


def percent(share):
    """A share as a percentage: two significant digits below 10%, whole ones above, and
    "<0.01%" for a share too small to read."""
    share = _finite(share)
    if share is None:
        return "n/a"
    value = 100.0 * share
    if value == 0:
        return "0%"
    if 0 < abs(value) < 0.01:
        return "<0.01%"
    if abs(value) >= 10:
        return f"{value:.0f}%"
    digits = max(0, 1 - int(math.floor(math.log10(abs(value)))))
    return f"{value:.{digits}f}%"


def binary_size(nbytes):
    nbytes = float(nbytes)
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return f"{readable(nbytes / scale)} {unit}"
    return f"{nbytes:.0f} B"


def clip(text, width=70):
    text = str(text)
    return text if len(text) <= width else text[:width - 3] + "..."
