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


DURATION_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6))


def duration_unit(values):
    """The one unit (name, scale) a column of durations is shown in: the one that keeps the
    largest of them readable (s, ms or us), so no column mixes units."""
    largest = max((abs(v) for v in map(_finite, values) if v is not None), default=0.0)
    for unit, scale in DURATION_UNITS:
        if largest >= scale:
            return unit, scale
    return DURATION_UNITS[-1] if largest > 0 else DURATION_UNITS[0]


def duration(seconds, unit=None):
    """Seconds in `unit` (a duration_unit), or else in the unit that keeps three significant
    digits readable: s, ms or us."""
    seconds = _finite(seconds)
    if seconds is None:
        return "n/a"
    name, scale = unit or duration_unit([seconds])
    return readable(seconds / scale, name)


def durations(values):
    """A column of durations, every one in the same unit."""
    unit = duration_unit(values)
    return [duration(v, unit) for v in values]


def percent(share):
    """A share as a percentage: two significant digits below 10%, whole ones above, and
    "<0.1%" for a share above 0 too small to read as a percentage."""
    share = _finite(share)
    if share is None:
        return "n/a"
    value = 100.0 * share
    if value == 0:
        return "0%"
    if 0 < abs(value) < 0.1:
        return "<0.1%" if value > 0 else ">-0.1%"
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
