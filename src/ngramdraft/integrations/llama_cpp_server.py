"""An OpenAI-compatible server (llama-cpp-python's) whose model drafts with ngramdraft.

``llama_cpp.server`` builds its model from settings that can name only its
own prompt-lookup draft model. :func:`create_app` lets it build the app and
load the model as usual, with ``logits_all`` set (which drafting needs), and
then gives the loaded model an :class:`NgramDraftModel`. The server handles
one request at a time (its own lock), so one drafter serves every request:
a request whose prompt does not extend the previous sequence finishes that
sequence into the dynamic cache, which is saved to ``--dynamic`` if given.

Needs ``pip install 'ngramdraft[server]'``.
"""

from typing import Any

from ..files.kinds import check_gguf
from ..optional import require
from .llama_cpp import NgramDraftModel


def create_app(
    model_path: str,
    *,
    draft_model: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    **model_settings: Any,
) -> Any:
    """The FastAPI app of ``llama_cpp.server`` serving ``model_path`` with ``draft_model``."""
    require("fastapi", "server", "ngramdraft serve")
    server_app = require("llama_cpp.server.app", "server", "ngramdraft serve")
    settings = require("llama_cpp.server.settings", "server", "ngramdraft serve")
    path = check_gguf(model_path)
    model = settings.ModelSettings(model=str(path), logits_all=True, **model_settings)
    server = settings.ServerSettings(host=host, port=port)
    app = server_app.create_app(server_settings=server, model_settings=[model])
    llama = server_app._llama_proxy()  # the model create_app just loaded (the only one)
    if isinstance(draft_model, NgramDraftModel):
        draft_model.check_model(llama)
    llama.draft_model = draft_model
    return app


def serve(
    model_path: str,
    *,
    draft_model: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    **model_settings: Any,
) -> None:
    """Run the server until interrupted (``ngramdraft serve``)."""
    uvicorn = require("uvicorn", "server", "ngramdraft serve")
    app = create_app(model_path, draft_model=draft_model, host=host, port=port, **model_settings)
    try:
        uvicorn.run(app, host=host, port=port)
    finally:
        if isinstance(draft_model, NgramDraftModel):
            draft_model.finish()
