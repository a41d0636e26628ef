"""Python's Jinja2 set up as Hugging Face transformers renders chat templates: an immutable sandbox,
trim_blocks and lstrip_blocks, the loopcontrols extension and the {% generation %} block, a tojson
that keeps non-ASCII text and takes indent/separators/sort_keys, raise_exception and strftime_now
globals, strftime_now on the fixtures' fixed clock (2026-01-15 09:30 UTC). The reference engine of
render_tool_cases.py and render_jinja2_cases.py (Jinja2 3.1; Debian: python3-jinja2).
"""
import datetime
import json

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED = datetime.datetime(2026, 1, 15, 9, 30, 0)


class Generation(jinja2.ext.Extension):
    """transformers' {% generation %} ... {% endgeneration %}: marks assistant text; renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body).set_lineno(lineno)


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED.strftime(fmt)
    return env
