"""The King James Bible corpus from Debian's bible-kjv package, one verse per line with the
reference ("Ge1:1 ") stripped. Training text is Genesis 1:1 through 3 John 1:14; validation is
Jude and Revelation (the last two books), held out."""
import re
import subprocess

TRAIN_RANGE = "Gen1:1-3Jo1:14"
VALID_RANGE = "Jude1:1-Rev22:21"
DESCRIPTION = (
    "King James Version (Debian package bible-kjv, `bible -f RANGE`), one verse per line with "
    f"its reference stripped. Train: {TRAIN_RANGE}. Validation (held out): {VALID_RANGE}."
)

_REF = re.compile(r"^\S+\d+:\d+ ")


def verses(verse_range):
    out = subprocess.run(["bible", "-f", verse_range], check=True, capture_output=True, text=True).stdout
    lines = []
    for line in out.splitlines():
        text = _REF.sub("", line, count=1).strip()
        if text:
            lines.append(text)
    return lines
