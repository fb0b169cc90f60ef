"""The exception every format tool raises on bad input: it names the field and the rule."""


class FormatError(ValueError):
    """Bad input to a format function. ``field`` names what was wrong, ``rule`` what it breaks;
    the message is ``"<field>: <rule>"``."""

    def __init__(self, field: str, rule: str):
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule
