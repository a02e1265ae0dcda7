"""HTML pages from the jinja2 templates in ``unlearn_app/templates/``: the leaderboard site and its submission pages
(:mod:`unlearn_app.leaderboard.site`), the HTML report (:mod:`unlearn_app.reports.html_page`) and a sweep's
leaderboard section in it. One base layout (``base.html``) and one stylesheet (``style.css``, inlined: a page
fetches nothing).

Autoescaping is on for every template, so a value a user or a submission wrote is text on the page, never markup.
No template marks a value ``|safe``; a section rendered by :func:`fragment` (itself autoescaped) is
:class:`~markupsafe.Markup` and is placed as it is, while a plain string in its place is escaped. A link built from
data goes through the ``href`` filter (:func:`relative_href`): percent-encoded, so it can only be a relative path
(no ``javascript:`` or other scheme, no other host); an image embedded in a page goes through the ``png`` filter
(:func:`embedded_png`), which lets nothing but a base64 PNG data URI through.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

#: How every embedded image starts (the report's figures, a sweep's picture): nothing fetched from elsewhere.
PNG_URI = "data:image/png;base64,"


def relative_href(path: object) -> str:
    """``path`` as a relative URL: every character but letters, digits, ``/`` and ``_.-~`` percent-encoded (a
    ``:`` too, so no scheme), and a leading ``/`` (an absolute path, or ``//host``) kept inside the site as ``./``."""
    url = quote(str(path), safe="/")
    return "./" + url.lstrip("/") if url.startswith("/") else url


def embedded_png(uri: str) -> str:
    """``uri`` if it is a base64 PNG data URI (:data:`PNG_URI` and base64 characters only); else a ValueError."""
    if not (isinstance(uri, str) and uri.startswith(PNG_URI) and re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", uri[len(PNG_URI):])):
        raise ValueError(f"an image embedded in a page must be a base64 PNG data URI, not {str(uri)[:40]!r}")
    return uri


@functools.cache
def environment() -> jinja2.Environment:
    """The one jinja2 environment: templates from the package, autoescaping on, a missing value an error."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("unlearn_app", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["href"] = relative_href
    env.filters["png"] = embedded_png
    return env


def render(name: str, **context: Any) -> str:
    """The page ``name`` (a file in ``unlearn_app/templates/``) rendered with ``context``."""
    return environment().get_template(name).render(**context)


def fragment(name: str, **context: Any) -> Markup:
    """Part of a page (a section another template places as it is), rendered with autoescaping like a page."""
    return Markup(render(name, **context))
