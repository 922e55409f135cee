"""The app's files: served at / from the package, with headers that keep it out of other sites' frames."""

from __future__ import annotations

import re

from whiz.web import STATIC_DIR


def test_index_is_served_with_security_headers(make_client):
    client = make_client()
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert '<script type="module" src="/static/app.js">' in page.text


def test_every_file_the_page_loads_is_served(make_client):
    """Each /static/ URL in index.html and each module import resolves (a typo would break the page)."""
    client = make_client()
    index = client.get("/").text
    wanted = set(re.findall(r'(?:src|href)="(/static/[^"]+)"', index))
    for module in STATIC_DIR.glob("*.js"):
        for name in re.findall(r'from "\./([^"]+)"', module.read_text()):
            wanted.add(f"/static/{name}")
    assert "/static/vendor/highlight.min.js" in wanted and "/static/vendor/diff2html-ui-base.min.js" in wanted
    for url in sorted(wanted):
        got = client.get(url)
        assert got.status_code == 200, url
        assert got.content, url
    js = client.get("/static/app.js")
    assert "javascript" in js.headers["content-type"]  # browsers refuse modules served as anything else


def test_vendored_libraries_keep_their_licenses_and_versions():
    vendor = STATIC_DIR / "vendor"
    readme = (vendor / "README.md").read_text()
    for name in ("highlight.min.js", "diff2html-ui-base.min.js", "diff2html.min.css"):
        assert (vendor / name).stat().st_size > 1000
        assert name in readme
    assert "Highlight.js v11.12.0" in (vendor / "highlight.min.js").read_text()[:200]
    assert "11.12.0" in readme and "3.4.56" in readme
    assert (vendor / "LICENSE-highlight.js").is_file() and (vendor / "LICENSE-diff2html.md").is_file()


def test_static_paths_cannot_leave_the_app_folder(make_client):
    client = make_client()
    for url in ("/static/../__init__.py", "/static/%2e%2e/__init__.py", "/static/..%2f..%2fconfig.py"):
        got = client.get(url)
        assert got.status_code == 404, url


def test_info_says_only_what_the_page_needs_before_a_key(make_client, tmp_path):
    client = make_client(api_keys=["k"], workspace=tmp_path, test_cmd="pytest -q")
    info = client.get("/whiz/info").json()
    assert info == {"version": info["version"], "auth_required": True, "workspace": True}
