"""code_executor: run model-written Python in the sandbox (tools/sandbox.py) and report stdout, stderr, exit status,
which limit, if any, was hit, the limits applied and the isolation in force. Limits come from `settings["sandbox"]`
(see `SandboxLimits`); `settings["sandbox_method"]` picks the confinement ("auto": bubblewrap when installed, else
user namespaces; "bubblewrap"; "namespaces"), `settings["sandbox_bwrap"]` the bwrap executable.

    omnidecision tool code_executor --args '{"code": "print(2**10)"}'
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field

from omnidecision.tools.base import Observation, ToolContext, register_tool
from omnidecision.tools.sandbox import SandboxLimits, run_python

logger = logging.getLogger(__name__)


class CodeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(..., min_length=1, max_length=100_000, description="Python source; print the result")


def _tail(text: str, n: int = 1500) -> str:
    return text if len(text) <= n else "…" + text[-n:]


@register_tool("code_executor")
class CodeExecutor:
    name: str  # set by @register_tool
    args_model = CodeArgs

    async def run(self, args: CodeArgs, ctx: ToolContext) -> Observation:
        limits = SandboxLimits.from_settings(ctx.settings)
        result = await run_python(
            args.code,
            limits,
            python=ctx.settings.sandbox_python,
            site=ctx.settings.sandbox_site,
            method=ctx.settings.sandbox_method,  # type: ignore[arg-type]  # run_python names a bad one
            bwrap=ctx.settings.sandbox_bwrap,
        )
        fields = {
            "stdout": result.stdout,
            "stderr": result.stderr,
            "exit_status": result.exit_status,
            "limit_hit": result.limit_hit,
            "truncated": result.truncated,
            "isolation": result.isolation,
            "limits": result.limits,
        }
        ok = result.error is None and result.limit_hit is None and result.exit_status == 0
        error = None
        if result.error:
            error = result.error
        elif result.limit_hit:
            error = f"sandbox limit hit: {result.limit_hit}"
        elif result.exit_status != 0:
            last = result.stderr.strip().splitlines()[-1:] or ["no stderr"]
            error = f"exit status {result.exit_status}: {last[0]}"
        text = result.stdout if ok else (result.stdout + ("\n" if result.stdout else "") + _tail(result.stderr))
        return Observation(
            tool=self.name, ok=ok, text=text.strip(), fields=fields, error=error, limit_hit=result.limit_hit
        )
