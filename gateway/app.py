"""The gateway's HTTP routes: the JSON API under ``/api`` (``Authorization: Bearer <token>``;
OpenAPI schema at ``/openapi.json``, browsable at ``/docs``) and the analysts' page at ``/``
(the token in an HttpOnly, SameSite=Strict cookie). The operations are
:class:`gateway.service.Service`'s; a refusal is a JSON ``{"detail": ...}`` with its status
(400, 401, 403, 404), and nothing is submitted or charged.

Run by ``dpcausal serve`` as ``uvicorn gateway.app:create_app --factory``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import parse_qs

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from dpcausal.ledger import Analyst
from gateway import page
from gateway.service import PrefectRuns, Refused, Service

COOKIE = "dpcausal_token"


class AskBody(BaseModel):
    """A release asked for: a dataset, one of its registered configs by name, analysis keys."""

    dataset: str = Field(description="A dataset id you are admitted to.")
    config: str = Field(description="One of the dataset's registered configs, by name "
                                    "(GET /api/datasets lists them).")
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description='Analysis keys of the Run form\'s allow-list, e.g. {"estimator.zeta": 0.5}.')


class MetaBody(BaseModel):
    """A meta-analysis of your released releases, named by release id."""

    release_ids: list[str] = Field(min_length=1)
    model: Literal["fixed", "random"] = "fixed"
    level: float = Field(0.95, gt=0, lt=1)


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _who(request: Request) -> Analyst:
    """The analyst of a JSON API request (401 unless a valid bearer token)."""
    return request.app.state.service.analyst(_token(request))


Who = Annotated[Analyst, Depends(_who)]


async def _form(request: Request) -> dict[str, str]:
    """A posted urlencoded form (first value of each field): read in the event loop, so that
    the routes using it stay synchronous and run on worker threads (Prefect's client and the
    ledger block; ``run_deployment`` returns an un-run coroutine inside an event loop)."""
    parsed = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


Form = Annotated[dict[str, str], Depends(_form)]


def create_app(service: Service | None = None) -> FastAPI:
    """The gateway's application on ``service`` (default: the project ledger and the served
    stack's Prefect API from the environment)."""
    svc = service if service is not None else Service(PrefectRuns())
    app = FastAPI(title="dpcausal gateway", version="1",
                  description="Ask for differentially private releases of the datasets you are "
                              "admitted to. Every refusal is made before anything is charged.")
    app.state.service = svc

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse({"detail": exc.message}, status_code=exc.status, headers=headers)


    # ------------------------------------------------------------------ JSON API
    @app.get("/api/datasets", summary="Your datasets with their public facts and spend")
    def datasets(analyst: Who) -> dict[str, Any]:
        return {"analyst": analyst.name, "datasets": svc.datasets(analyst)}

    @app.post("/api/plan", summary="Precision of a core release (nothing read or charged)")
    def plan(body: AskBody, analyst: Who) -> dict[str, Any]:
        return svc.plan(analyst, body.dataset, body.config, body.settings)

    @app.post("/api/releases", status_code=202, summary="Ask for a release")
    def ask(body: AskBody, analyst: Who) -> dict[str, Any]:
        return svc.ask(analyst, body.dataset, body.config, body.settings)

    @app.get("/api/requests/{request_id}", summary="A request's state, and its release")
    def request_state(request_id: str, analyst: Who) -> dict[str, Any]:
        return svc.request(analyst, request_id)

    @app.get("/api/releases", summary="Your releases, oldest first")
    def releases(analyst: Who) -> dict[str, Any]:
        return {"releases": svc.releases(analyst)}

    @app.get("/api/releases/{release_id:path}", summary="One of your releases (Release JSON)")
    def release(release_id: str, analyst: Who) -> dict[str, Any]:
        return svc.release(analyst, release_id)

    @app.post("/api/meta", summary="Pool your releases named by release id (costs nothing)")
    def meta(body: MetaBody, analyst: Who) -> dict[str, Any]:
        return svc.meta(analyst, body.release_ids, body.model, body.level)

    # ------------------------------------------------------------------ the page
    def _cookie_analyst(request: Request) -> Analyst | None:
        try:
            return svc.analyst(request.cookies.get(COOKIE))
        except Refused:
            return None

    def _html(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(text, status_code=status, headers=page.HEADERS)

    def _home(analyst: Analyst, notice: str | None = None, error: bool = False,
              status: int = 200) -> HTMLResponse:
        return _html(page.home(analyst.name, svc.datasets(analyst), svc.releases(analyst),
                               notice, error), status)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def root(request: Request) -> HTMLResponse:
        analyst = _cookie_analyst(request)
        return _html(page.signin()) if analyst is None else _home(analyst)

    @app.post("/signin", include_in_schema=False)
    def signin(form: Form) -> Response:
        token = form.get("token", "").strip()
        try:
            svc.analyst(token)
        except Refused as exc:
            return _html(page.signin(exc.message), 401)
        out = RedirectResponse("/", status_code=303)
        out.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return out

    @app.post("/signout", include_in_schema=False)
    def signout() -> Response:
        out = RedirectResponse("/", status_code=303)
        out.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return out

    @app.post("/ask", include_in_schema=False)
    def ask_page(request: Request, form: Form) -> Response:
        analyst = _cookie_analyst(request)
        if analyst is None:
            return _html(page.signin("sign in first"), 401)
        dataset, _, config = form.get("target", "").rpartition("/")
        try:
            settings = page.settings_from_form(form)
            asked = svc.ask(analyst, dataset, config, settings)
        except ValueError as exc:
            return _home(analyst, " ".join(str(exc).split()), True, 400)
        except Refused as exc:
            return _home(analyst, exc.message, True, exc.status)
        return _home(analyst, f"Asked: request {asked['request_id']} on {dataset} / {config}. "
                              "It appears under your releases once its charge is reserved; "
                              "reload this page to follow it.")

    @app.get("/forest.svg", include_in_schema=False)
    def forest(request: Request, dataset: str) -> Response:
        from plots.releases import releases_forest_svg

        analyst = _cookie_analyst(request)
        if analyst is None:
            return Response(status_code=401)
        rows = page.forest_rows(svc.releases(analyst), dataset)
        if not rows:
            return Response(status_code=404)
        return Response(releases_forest_svg(rows, f"Your releases on {dataset}"),
                        media_type="image/svg+xml", headers=page.HEADERS)

    return app
