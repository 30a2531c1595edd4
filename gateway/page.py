"""The analysts' page: plain server-rendered HTML (no script). Every value shown is escaped
(:func:`_e`), the token lives only in an HttpOnly, SameSite=Strict cookie, and the page
sends a Content-Security-Policy that allows no script and no third-party resource."""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

import yaml

#: the headers every page carries
HEADERS = {"Content-Security-Policy": "default-src 'none'; img-src 'self'; "
                                      "style-src 'unsafe-inline'; form-action 'self'; "
                                      "frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store"}

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #bbb;padding:.3em .6em;
text-align:left}th{background:#eef}.notice{background:#ffd;padding:.5em;border:1px solid #cc9}
.error{background:#fdd;padding:.5em;border:1px solid #c99}label{display:inline-block;
min-width:11em}form.ask div{margin:.3em 0}"""


def _e(value: Any) -> str:
    """``value`` as escaped HTML text (None as '-')."""
    return "-" if value is None else html.escape(str(value), quote=True)


def _doc(title: str, body: str) -> str:
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}"
            f"</title><style>{_STYLE}</style></head><body>{body}</body></html>")


def _notice(notice: str | None, error: bool) -> str:
    if not notice:
        return ""
    return f"<p class='{'error' if error else 'notice'}' id='notice'>{_e(notice)}</p>"


def signin(notice: str | None = None) -> str:
    """The sign-in form: the analyst's token, posted once, kept in a cookie."""
    return _doc("dpcausal: sign in", (
        "<h1>dpcausal: private releases for analysts</h1>" + _notice(notice, True) +
        "<form method='post' action='/signin'><label for='token'>Your token</label> "
        "<input type='password' id='token' name='token' size='60' autocomplete='off' required> "
        "<button type='submit'>Sign in</button></form>"
        "<p>The curator gave you the token with this page's address. It is kept in a cookie "
        "that scripts cannot read.</p>"))


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def _datasets(datasets: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{_e(d['dataset'])}</td><td>{_e(d['n'])}</td><td>{_e(d['d'])}</td>"
        f"<td>{_e(', '.join(c['name'] for c in d['configs']) or '-')}</td>"
        f"<td>{_e(d['cap'])}</td><td>{_e(d['spent']['text'])}</td>"
        f"<td>{_e('dataset cap' if d['your_cap_zeta'] is None else d['your_cap_zeta'])}</td>"
        f"<td>{_e(d['your_spent']['text'])}</td></tr>" for d in datasets)
    return ("<h2>Your datasets</h2><table id='datasets'><tr><th>dataset</th><th>n</th>"
            "<th>d</th><th>configs</th><th>cap</th><th>spent (all)</th><th>your cap (zeta)"
            f"</th><th>your spend</th></tr>{rows}</table>")


def _ask(datasets: list[dict[str, Any]]) -> str:
    options = "".join(
        f"<option value='{_e(d['dataset'])}/{_e(c['name'])}'>{_e(d['dataset'])} / "
        f"{_e(c['name'])} ({_e(c['kind'])})</option>"
        for d in datasets for c in d["configs"])
    field = ("<div><label for='{0}'>{1}</label> <input id='{0}' name='{0}' {2}> "
             "<small>{3}</small></div>")
    return (
        "<h2>Ask for a release</h2><form class='ask' method='post' action='/ask'>"
        f"<div><label for='target'>dataset / config</label> <select id='target' name='target'>"
        f"{options}</select></div>"
        + field.format("zeta", "zeta (this release)", "type='number' step='any' min='0'",
                       "empty: the config's")
        + field.format("n_folds", "K (folds)", "type='number' min='2' step='1'",
                       "core release; empty: the config's")
        + field.format("outcome_lower", "outcome lower bound", "type='number' step='any'",
                       "with the upper bound; empty: the config's")
        + field.format("outcome_upper", "outcome upper bound", "type='number' step='any'", "")
        + "<div><label for='more'>more analysis keys</label> <textarea id='more' name='more' "
        "rows='3' cols='50' placeholder='estimator.estimator=dr'></textarea> <small>one "
        "KEY=VALUE a line, from the Run form's allow-list</small></div>"
        "<div><button type='submit'>Ask</button></div></form>")


def settings_from_form(form: dict[str, str]) -> dict[str, Any]:
    """The analysis settings the ask form gave (empty fields left out; ValueError on a
    malformed line or number)."""
    settings: dict[str, Any] = {}
    if form.get("zeta"):
        settings["estimator.zeta"] = float(form["zeta"])
    if form.get("n_folds"):
        settings["estimator.n_folds"] = int(form["n_folds"])
    lo, hi = form.get("outcome_lower"), form.get("outcome_upper")
    if lo or hi:
        if not (lo and hi):
            raise ValueError("give both outcome bounds, or neither")
        settings["estimator.outcome_bounds"] = [float(lo), float(hi)]
    for line in (form.get("more") or "").splitlines():
        if not line.strip():
            continue
        key, eq, value = line.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"more analysis keys: expected KEY=VALUE, got {line.strip()!r}")
        settings[key.strip()] = yaml.safe_load(value)
    return settings


def _releases(releases: list[dict[str, Any]]) -> str:
    rows = []
    for r in reversed(releases):
        rel = r["release"] or {}
        ci = rel.get("ci")
        privacy = rel.get("privacy") or {}
        spend = (f"zeta {privacy['zeta']:.4g}" if privacy.get("zeta") is not None
                 else f"epsilon {_number(privacy.get('epsilon'))}")
        rows.append(
            f"<tr><td>{_e(r['release_id'])}</td><td>{_e(r['dataset'])}</td>"
            f"<td>{_e(r['status'])}</td><td>{_e(_number(rel.get('ate')))}</td>"
            f"<td>{_e('-' if not ci else f'[{ci[0]:.4g}, {ci[1]:.4g}]')}</td>"
            f"<td>{_e(spend if rel else '-')}</td><td>{_e(r['reserved_at'][:19])}</td></tr>")
    table = ("<table id='releases'><tr><th>release id</th><th>dataset</th><th>status</th>"
             "<th>estimate</th><th>CI</th><th>spend</th><th>asked (UTC)</th></tr>"
             f"{''.join(rows)}</table>") if rows else "<p>No releases yet.</p>"
    plotted = sorted({r["dataset"] for r in releases if r["release"]
                      and r["release"].get("ci") and r["release"].get("ate") is not None})
    plots = "".join(f"<p><img class='forest' alt='forest plot of your releases on {_e(d)}' "
                    f"src='/forest.svg?dataset={_e(quote(d, safe=''))}'></p>" for d in plotted)
    return f"<h2>Your releases</h2>{table}{plots}"


def home(name: str, datasets: list[dict[str, Any]], releases: list[dict[str, Any]],
         notice: str | None = None, error: bool = False) -> str:
    """The signed-in page: datasets, the ask form, the analyst's releases and their plots."""
    return _doc("dpcausal: your releases", (
        f"<h1>dpcausal: private releases</h1><p>Signed in as <strong id='who'>{_e(name)}"
        "</strong>. <form style='display:inline' method='post' action='/signout'>"
        "<button type='submit'>Sign out</button></form></p>" + _notice(notice, error)
        + _datasets(datasets) + _ask(datasets) + _releases(releases)
        + "<p><small>Every figure here is a differentially private release or a public fact; "
        "the JSON API and its schema: <a href='/docs'>/docs</a>.</small></p>"))


def forest_rows(releases: list[dict[str, Any]], dataset: str) -> list[tuple[str, float, float,
                                                                              float]]:
    """``(label, estimate, ci_low, ci_high)`` of the analyst's released releases on
    ``dataset`` that have an estimate and a CI, oldest first."""
    return [(r["release_id"].rsplit("/", 1)[-1] + f" ({r['reserved_at'][:16]})",
             float(r["release"]["ate"]), float(r["release"]["ci"][0]),
             float(r["release"]["ci"][1]))
            for r in releases if r["dataset"] == dataset and r["release"]
            and r["release"].get("ate") is not None and r["release"].get("ci")]
