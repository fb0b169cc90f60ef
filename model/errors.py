"""The exception every format tool raises on bad input: it names the field and the rule."""

import numbers


class FormatError(ValueError):
    """Bad input to a format function. ``field`` names what was wrong, ``rule`` what it breaks;
    the message is ``"<field>: <rule>"``."""

    def __init__(self, field: str, rule: str):
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


def check_shape(shape, names: str, *, leading_optional: bool = False,
                error: type[FormatError] = FormatError) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, one per letter of ``names`` (e.g. "NCHW"), each at least 1.
    With ``leading_optional`` the first dimension may be left out and becomes 1. Raises
    ``error`` naming ``shape`` (wrong rank) or ``shape.<letter>`` (a size below 1)."""
    try:
        given = tuple(shape)
    except TypeError:
        raise error("shape", f"must be a sequence of sizes, not {shape!r}") from None
    for v in given:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise error("shape", f"sizes must be integers, not {v!r}")
    dims = tuple(int(v) for v in given)
    if leading_optional and len(dims) == len(names) - 1:
        dims = (1, *dims)
    if len(dims) != len(names):
        full = f"({', '.join(names)})"
        form = f"{full} or ({', '.join(names[1:])})" if leading_optional else full
        raise error("shape", f"{form}, not {tuple(shape)}")
    for name, v in zip(names, dims, strict=True):
        if v < 1:
            raise error(f"shape.{name}", f"must be at least 1, not {v}")
    return dims
