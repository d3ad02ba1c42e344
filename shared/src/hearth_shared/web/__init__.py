"""What both HTTP APIs share at their edge: the bearer-token dependency and health (``http``), error
answers (``http_errors``) and the request body limit (``body_limit``). FastAPI and Starlette; the token
format itself is ``hearth_shared.schema.auth``, which the CLI and the websockets check too."""
