"""Short names of the protos' enum values, spelled as specctl, the metrics and the OpenAI API spell
them (JOB_TYPE_DRAFTER_STAGE1 → "drafter-stage1", FINISH_REASON_LENGTH → "length"), derived from
the generated enums so that they never drift from the protos."""
from __future__ import annotations

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper


def _prefix(enum: EnumTypeWrapper) -> str:
    # Every specd enum's 0 is <PREFIX>UNSPECIFIED.
    return enum.Name(0).removesuffix("UNSPECIFIED")


def short_name(enum: EnumTypeWrapper, value: int) -> str | None:
    """The value's short name; None for the UNSPECIFIED value, which means "not set"."""
    if value == 0:
        return None
    return enum.Name(value).removeprefix(_prefix(enum)).lower().replace("_", "-")


def full_name(enum: EnumTypeWrapper, name: str) -> str:
    """The inverse of short_name, as the enum value's name (which proto constructors take);
    ValueError, listing the short names, for anything else."""
    names = {short_name(enum, value): enum.Name(value) for value in enum.values() if value != 0}
    if name not in names:
        raise ValueError(f"{name!r} is not one of: {', '.join(map(str, names))}")
    return names[name]
