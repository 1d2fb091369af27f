"""The ledger agent as a TRL environment: trajectory-level GRPO through TRL's own `environment_factory` API.

This is what a TRL user who wanted to train this planner end to end would write: `GRPOTrainer(environment_factory=
LedgerEnvironment, ...)`. One environment instance per rollout runs the REAL agent loop (`agent.loop.run_task`:
decompose, critic, finalizer, reducer, the offline tools) over one task; only the planner is the policy being
trained. `omnidecision grpo-agent --config configs/grpo/tiny-cpu-env.yaml --model_name_or_path SFT --dataset_name
TASKS` (`environment: ledger` in the recipe; grounding/grpo.py) builds it; decision-level GRPO (`rl/train.py`) scores
K decisions per ledger state without executing them instead.

How TRL drives it (trl 1.16, `GRPOTrainer._generate_and_score_completions` / `_tool_call_loop`):

- dataset row: `prompt` = [planner system prompt, empty user turn] and `task` (the task record as JSON).
  `reset(**row)` starts the agent on the task in a worker thread, runs it to its first planner call and returns that
  call's digest, which TRL appends to the empty user turn: the model's first prompt is token for token the
  planner messages the agent renders (`protocol.prompts.render_planner_messages`).
- the planner's decision is the tool call. The model writes its usual action JSON
  (`{"action":"call","need":1,"tool":"subtitle_grounding"}` or `{"action":"finish"}`); `TOOL_RESPONSE_TEMPLATE`
  (set on the tokenizer) parses that JSON as a call of the method named by its `action` field, `call` or `finish`,
  with the JSON's fields as arguments. So the SFT planner needs no new output format. The method hands the action
  to the waiting agent loop as the planner's raw output (the loop parses and validates it as it does any model
  output), and returns what the agent shows the planner next: the NEW DIGEST of the ledger after the tool ran, the
  critic judged and the reducer committed, or, when the run stopped, a line with its outcome and answer.
- what the model sees after each call: TRL's own growing conversation, not the digest alone. TRL's API appends
  every tool response to the conversation (`TOOL_CHAT_TEMPLATE` renders a tool response as a user turn, the way the
  planner prompt shows a digest), so decision t is generated after [system, digest 0, action 0, ..., digest t]. The
  agent's own planner (and the in-loop evaluation) sees [system, digest t] only; the last turn is the same, the
  earlier turns are extra context TRL's contract adds and the decision-level arm never has.
- a rollout ends when the run stops (the tool response says so and the model writes anything that is not an
  action), when the model writes something that does not parse as an action (TRL then sees no tool call: the
  agent's own loop would have recorded an invalid action and asked again), or at TRL's `max_completion_length` /
  `max_tool_calling_iterations`. A run still waiting for its planner is then stopped (outcome `error`, no answer).
  JSON with an unknown `action` or unknown fields never reaches the agent: TRL answers it with an error message as
  the tool response.
- `get_reward()`: 1.0 when the judged final answer is correct (`rollout.runner.judge_record`, the collection's
  judge), else 0.0; with `closure_weight` w, (judged + w * closure) / (1 + w), where closure is the share of the
  run's blocking needs filled at the end. TRL logs it under `rewards/LedgerEnvironment/mean`. Every finished
  rollout is appended to `LedgerEnvironment.finished` (task id, outcome, answer, judged, reward), so a caller can
  check the trainer's rewards against the judged runs.

The roles other than the planner and the tools are the offline suite's, as the demo's evaluation uses: the
noise-free scripted teacher (`backends.teacher.TeacherBackend(noise=0)`) and the offline tools. It sits in the
rollout layer, where running the agent is allowed; GRPO with the agent in the loop (`grounding/grpo.py`, above both
this layer and `rl`, which never loads the agent) imports it and drives the decision GRPO's phases through
`LedgerEnvironment.load_dataset`, `use_tool_format`, `configure` and `finished`.

    omnidecision grpo-agent --config configs/grpo/tiny-cpu-env.yaml --model_name_or_path M --dataset_name TASKS.jsonl
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
from typing import Any, ClassVar

from omnidecision.agent.config import AgentConfig
from omnidecision.agent.loop import run_task
from omnidecision.backends.teacher import TeacherBackend
from omnidecision.protocol.chat import BackendError, ChatResponse, Usage
from omnidecision.protocol.prompts import load_prompt
from omnidecision.rollout.runner import judge_record
from omnidecision.tasks.loaders import load_tasks
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

# The tiny planner's ChatML (omnidecision.synthetic.tiny.CHAT_TEMPLATE) plus the two pieces TRL's tool loop needs:
# an assistant tool call renders as the planner's action JSON (compact, field order action first, as
# protocol.actions.render_action writes it), and a tool response renders as a user turn (where the planner prompt
# puts a digest). Prefix-preserving, so TRL keeps it as is.
TOOL_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{% generation %}"
    "{%- if message.get('tool_calls') %}"
    "{%- for tc in message['tool_calls'] %}{%- set f = tc['function'] if tc.get('function') else tc %}"
    "{{- '{\"action\":' + f['name'] | tojson }}"
    "{%- for k, v in f['arguments'].items() if k != 'action' and v is not none %}"
    "{{- ',' + k | tojson + ':' + v | tojson(separators=(',', ':')) }}"
    "{%- endfor %}{{- '}' }}{%- endfor %}"
    "{%- else %}{{- message['content'] }}{%- endif %}"
    "{{- '<|im_end|>' }}{% endgeneration %}"
    "{{- '\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{{- '<|im_start|>user\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# transformers' response parser (>= 5.13): the whole assistant turn is one JSON action; its `action` field names
# the environment method and the object itself is the arguments. Text that is not JSON fails to parse and TRL keeps
# it as plain content (no tool call: the rollout ends).
TOOL_RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "close_pattern": r"<\|im_end\|>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{content.action}", "arguments": "{content}"}},
        },
    },
}

_ABORT = object()  # sent to a waiting planner call: stop the run


def use_action_tool_format(tokenizer: Any) -> Any:
    """Give `tokenizer` the chat template and response template above (in place; returned): the planner's own
    action JSON is the tool call. The template is ChatML: the tiny planner's, and Qwen3's without think blocks."""
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = TOOL_RESPONSE_TEMPLATE
    return tokenizer


def task_rows(tasks: list[Any]) -> list[dict[str, Any]]:
    """One dataset row per task: the planner's system prompt and an empty user turn (the digest comes from
    `reset`), and the task record as JSON."""
    system = load_prompt("planner")
    return [{"prompt": [{"role": "system", "content": system}, {"role": "user", "content": ""}],
             "task": task.model_dump_json(), "task_id": task.id} for task in tasks]


def load_task_dataset(path: str, fmt: str = "auto") -> Any:
    """Tasks (any format `tasks.loaders.load_tasks` reads) as a `datasets.Dataset` of `task_rows`."""
    import datasets


    tasks = load_tasks(path, fmt)
    if not tasks:
        raise ValueError(f"{path}: no tasks")
    return datasets.Dataset.from_list(task_rows(tasks))


class _Planner:
    """The planner role of one run: each request goes out to the environment (the model's turn) and the reply it
    gets back is the planner's raw output."""

    def __init__(self, outbox: queue.Queue, inbox: queue.Queue) -> None:
        self.outbox, self.inbox = outbox, inbox

    async def chat(self, request: Any) -> Any:
        self.outbox.put(("ask", request.messages))
        # a blocking wait is fine: this event loop belongs to this run's own thread
        reply = self.inbox.get()
        if reply is _ABORT:
            raise BackendError("the rollout ended before the run stopped (the policy wrote no further action)")
        return ChatResponse(text=reply, usage=Usage())


class LedgerEnvironment:
    """One rollout of the ledger agent on one task for TRL's `environment_factory` (see the module docstring).
    Class attributes are the run's settings (`configure` sets them before the trainer is built)."""

    agent_config: ClassVar[Any] = None
    closure_weight: ClassVar[float] = 0.0
    finished: ClassVar[list[dict[str, Any]]] = []
    # What GRPO needs besides the class, reached through it (rl imports no agent code). Class methods, not plain
    # functions: TRL offers every public plain function of the class to the model as a tool.
    @classmethod
    def load_dataset(cls, path: str, fmt: str = "auto") -> Any:
        return load_task_dataset(path, fmt)

    @classmethod
    def use_tool_format(cls, tokenizer: Any) -> Any:
        return use_action_tool_format(tokenizer)

    @classmethod
    def configure(cls, *, digest_max_chars: int = 1000, step_budget: int = 15, closure_weight: float = 0.0) -> None:
        cls.agent_config = AgentConfig(mode="ledger", step_budget=step_budget, digest_max_chars=digest_max_chars)
        cls.closure_weight = closure_weight
        cls.finished = []

    def __init__(self) -> None:
        if type(self).agent_config is None:
            type(self).configure()
        self._thread: threading.Thread | None = None
        self._outbox: queue.Queue = queue.Queue()
        self._inbox: queue.Queue = queue.Queue()
        self._result: dict[str, Any] | None = None
        self._rollouts = 0

    # -- TRL's contract --------------------------------------------------------------------------------------
    def reset(self, **row: Any) -> str:
        """Start the agent on the row's task; returns the digest of its first planner call."""
        self._stop_run()
        if "task" not in row:
            raise ValueError("LedgerEnvironment: the dataset row has no `task` column (build rows with task_rows)")
        task = Task.model_validate_json(row["task"])
        self._rollouts += 1
        self._outbox, self._inbox, self._result = queue.Queue(), queue.Queue(), None
        self._thread = threading.Thread(target=self._run, args=(task, self._rollouts), daemon=True,
                                        name=f"ledger-env-{task.id}")
        self._thread.start()
        return self._next()

    def call(self, action: str, need: int | None = None, tool: str | None = None, query: str | None = None,
             slot: str | None = None) -> str:
        """Call a tool for one open need (or compute one slot), as the ledger digest suggests.

        Args:
            action: Always "call".
            need: Index of the need the call is aimed at.
            tool: The tool to call (default: the tool of the need's preferred source).
            query: The query (default: the need's query focus with upstream values filled in).
            slot: A slot whose needs are filled, instead of a need.

        Returns:
            The ledger digest after the call, or the run's outcome when it stopped.
        """
        fields = {"action": action, "need": need, "slot": slot, "tool": tool, "query": query}
        return self._decide(json.dumps({k: v for k, v in fields.items() if v is not None}, separators=(",", ":")))

    def finish(self, action: str = "finish") -> str:
        """Finish: the finalizer drafts the answer from the ledger and checks it.

        Args:
            action: Always "finish".

        Returns:
            The run's outcome and answer, or the ledger digest when the finalizer's check failed.
        """
        return self._decide(json.dumps({"action": action}, separators=(",", ":")))

    def get_reward(self) -> float:
        """The judged answer (1 correct, 0 not), mixed with the end closure when `closure_weight` > 0."""
        self._stop_run()
        result = self._result or {}
        judged = 1.0 if result.get("correct") else 0.0
        w = type(self).closure_weight
        reward = (judged + w * result.get("closure", 0.0)) / (1.0 + w) if w > 0 else judged
        type(self).finished.append({**result, "reward": reward})
        return reward

    # -- the run -------------------------------------------------------------------------------------------
    def _decide(self, raw: str) -> str:
        if self._result is not None or self._thread is None:
            return self._ended_text()
        self._inbox.put(raw)
        return self._next()

    def _next(self) -> str:
        kind, payload = self._outbox.get()
        if kind == "ask":
            return payload[-1]["content"]
        self._result = payload
        self._thread = None
        return self._ended_text()

    def _ended_text(self) -> str:
        r = self._result or {}
        return f"The run stopped: outcome {r.get('outcome')}, answer {r.get('answer')!r}. No further action."

    def _stop_run(self) -> None:
        """End a run still waiting for its planner (outcome error) and wait for its record."""
        while self._thread is not None:
            self._inbox.put(_ABORT)
            self._next()

    def _run(self, task: Any, rollout: int) -> None:
        async def go() -> dict[str, Any]:
            backends = {"default": TeacherBackend(noise=0.0), "planner": _Planner(self._outbox, self._inbox)}
            record = await run_task(task, type(self).agent_config, backends, sample=rollout,
                                    run_id=f"{task.id}-env{id(self):x}-r{rollout}")
            judged = await judge_record(task, record, None)
            return {"task_id": task.id, "outcome": record.outcome, "answer": record.answer,
                    "correct": bool(judged.correct), "closure": _closure(record), "steps": len(record.steps)}

        try:
            result = asyncio.run(go())
        except Exception as exc:  # run_task never raises; the judge or a bug here must still release the trainer
            logger.exception("ledger environment run failed")
            result = {"task_id": task.id, "outcome": "error", "answer": None, "correct": False, "closure": 0.0,
                      "error": f"{type(exc).__name__}: {exc}"}
        self._outbox.put(("done", result))


def _closure(record: Any) -> float:
    """Share of the blocking needs filled in the run's last ledger state (1.0 when it has none)."""
    state = record.final_ledger if getattr(record, "final_ledger", None) is not None else (
        record.steps[-1].ledger if record.steps else None)
    if state is None:
        return 0.0
    blocking = [n for n in state.needs if n.role == "blocking"]
    return sum(n.status == "filled" for n in blocking) / len(blocking) if blocking else 1.0
