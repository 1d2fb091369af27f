"""The judge inside the closure reward logs `judge/failures` through TRL's own metric path, and the counters of
`closure_eval.json` are the sum over the processes' judges (issue 38, item 3). A real GRPOTrainer scores a fixed
group on a tiny planner; the judge is a real RewardJudge on an in-test HTTP stub that fails for one decision.

    .venv/bin/pytest tests/rl/test_judge_stats.py -q
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest

from omnidecision.ledger import Ledger
from omnidecision.protocol.rows import rl_row
from omnidecision.rewards.closure import EXAMPLE_LEDGER
from omnidecision.rl.judge_stats import gather_judge_stats, judges_of, sum_stats, with_judge_logging

from .test_judge_aggregation import RECIPE, RIGHT, WRONG_TOOL, _fixed_rollout, _Judge

pytestmark = pytest.mark.requires("trl")


@pytest.fixture
def failing_judge():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    server.mode = "fail"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_judge_inside_the_closure_reward_logs_its_failures(tiny_planner, tmp_path, failing_judge, monkeypatch):
    import datasets
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from omnidecision.rewards import get_reward_funcs
    from omnidecision.rl.config import parse_args

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    script, training, _ = parse_args([
        "--config", str(RECIPE), "--model_name_or_path", str(tiny_planner), "--dataset_name", str(tmp_path),
        "--output_dir", str(tmp_path / "out"), "--num_generations", "2", "--per_device_train_batch_size", "2",
        "--generation_batch_size", "2", "--reward_funcs", "closure", "--reward_weights", "1.0", "--judge_weight",
        "1.0", "--judge_base_url", failing_judge, "--judge_model", "judge", "--judge_timeout_s", "5",
        "--log_completions", "false", "--report_to", "none"])
    plain = get_reward_funcs(script.reward_funcs, **script.reward_params())
    funcs = with_judge_logging(plain)
    assert funcs[0] is not plain[0] and funcs[0].__name__ == plain[0].__name__ == "closure_reward"
    (judge,) = judges_of(funcs)
    row = rl_row(Ledger.model_validate_json(EXAMPLE_LEDGER), task_id="t", run_id="r", level="1", category="c")
    trainer = GRPOTrainer(model=str(tiny_planner), reward_funcs=funcs, args=training,
                          train_dataset=datasets.Dataset.from_list([row]),
                          processing_class=AutoTokenizer.from_pretrained(str(tiny_planner)),
                          rollout_func=_fixed_rollout([RIGHT, WRONG_TOOL]))
    trainer.model.train()
    trainer._generate_and_score_completions([row, row])
    metrics = trainer._metrics["train"]
    assert metrics["judge/failures"] == [1.0]  # the web_search decision's call failed (HTTP 500)
    assert metrics["judge/cache_hits"] == [0.0]
    stats = gather_judge_stats([judge])  # one process: its own counters
    assert stats["failed"] == 1 and stats["successes"] == 1 and stats["processes"] == 1
    judge.close()


def test_stats_of_several_processes_are_summed():
    parts = [{"requests": 4, "cache_hits": 1, "successes": 3, "skipped_invalid": 0, "failed": 1,
              "failures": {"timeout": 1}},
             {"requests": 6, "cache_hits": 0, "successes": 4, "skipped_invalid": 2, "failed": 2,
              "failures": {"timeout": 1, "http 500": 1}}]
    total = sum_stats(parts)
    assert total["requests"] == 10 and total["failed"] == 3 and total["skipped_invalid"] == 2
    assert total["failures"] == {"timeout": 2, "http 500": 1} and total["processes"] == 2
    assert gather_judge_stats([]) is None
