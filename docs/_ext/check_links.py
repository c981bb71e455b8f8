"""Check every link within the built site: ``python docs/_ext/check_links.py docs/_build/html``.

Every ``href`` and ``src`` of every HTML page that points inside the site (no scheme, not
``mailto:``) must name a file that exists, and its ``#fragment``, if any, an ``id`` (or ``name``)
on the page it points to.  Links to other sites are not followed (the build must not need the
network).  Prints one line per broken link and exits 1 if there is any; 0 otherwise.
"""
from __future__ import annotations

import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)
            if key in ("href", "src") and value is not None and not (tag == "link" and key == "href"
                                                                      and value.startswith("http")):
                self.links.append(value)


def _parse(path: str) -> _Page:
    page = _Page()
    with open(path, encoding="utf-8", errors="replace") as fh:
        page.feed(fh.read())
    return page


def broken_links(root: str) -> list:
    """(page, link, why) for every link within ``root`` that does not resolve."""
    root = os.path.abspath(root)
    pages = {}
    for folder, dirs, files in os.walk(root):
        if os.path.relpath(folder, root).split(os.sep)[0] == "_static":
            continue   # the theme's assets (its templates are not pages)
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                pages[path] = _parse(path)
    bad = []
    for path, page in sorted(pages.items()):
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = path if not parts.path else os.path.normpath(os.path.join(os.path.dirname(path),
                                                                              unquote(parts.path)))
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            where = os.path.relpath(path, root)
            if not target.startswith(root + os.sep) and target != root:
                bad.append((where, link, "points outside the site"))
            elif not os.path.exists(target):
                bad.append((where, link, "no such file"))
            elif parts.fragment and target.endswith(".html"):
                ids = pages[target].ids if target in pages else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    bad.append((where, link, f"no #{parts.fragment} on {os.path.relpath(target, root)}"))
    return bad


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: check_links.py BUILT_HTML_DIR", file=sys.stderr)
        return 2
    bad = broken_links(argv[0])
    for where, link, why in bad:
        print(f"{where}: {link}: {why}")
    print(f"checked the links within {argv[0]}: {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
