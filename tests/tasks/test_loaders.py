"""Loaders (OmniGAIA, WorldSense, JSONL, synthetic dir) and `omnidecision tasks check`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnidecision.tasks.loaders import TaskFileError, detect_format, load_tasks
from omnidecision.tasks.loaders.omnigaia import infer_answer_type, normalize_sources

DATA = Path(__file__).resolve().parents[1] / "data"
PROJECT = Path(__file__).resolve().parents[2]
DEV_SHA256 = "509b1439a35b8f951063502eea2ee6c3902696682512af7c60503572ecc69cdb"


def test_dev_fixture_is_the_shared_dev_subset(omnigaia_dev):
    """The repository's copy is the pinned file, and the same as ../shared's where the project has that folder."""
    assert hashlib.sha256(omnigaia_dev.read_bytes()).hexdigest() == DEV_SHA256
    shared = PROJECT.parent / "shared" / "data" / "omnigaia" / "dev_metadata.json"
    if shared.is_file():
        assert shared.read_bytes() == omnigaia_dev.read_bytes(), f"{shared} changed: refresh tests/data/omnigaia_dev"


def test_all_72_dev_records_load_and_irregular_ones_survive(omnigaia_dev):
    raw = json.loads(omnigaia_dev.read_text())
    tasks = load_tasks(omnigaia_dev)
    assert len(tasks) == len(raw) == 72
    assert [t.id for t in tasks] == [str(r["id"]) for r in raw]
    by_id = {t.id: t for t in tasks}
    irregular = [r for r in raw if not all(isinstance(s, dict) for s in (r["sources"] if isinstance(r["sources"], list)
                                                                          else [r["sources"]]))
                 or r.get("total_steps") is None or r.get("required_external_tools") is None]
    assert irregular, "the dev subset is known to hold irregular records"
    for r in irregular:
        t = by_id[str(r["id"])]
        assert t.meta["raw"] == r
        assert t.meta["sources"], f"record {r['id']}: its sources were lost"
    for r, t in zip(raw, tasks, strict=True):
        assert t.source == "omnigaia" and t.answer == r["answer"] and t.question == r["question"]
        assert t.level == r["Level"].lower() and t.category == r["category"]
        assert [a.id for a in t.assets] == [a["id"] for a in r["omni_modal_input"]]
        assert [a.type for a in t.assets] == [a["type"] for a in r["omni_modal_input"]]
        assert all(a.path is None for a in t.assets)  # no media_dir: no media paths
    assert {t.answer_type for t in tasks} >= {"number", "text"}


def test_omnigaia_small_fixture_fields_and_media_dir(tmp_path):
    (tmp_path / "audios").mkdir()
    (tmp_path / "audios" / "abc123XYZ.wav").write_bytes(b"RIFF")
    tasks = load_tasks(DATA / "omnigaia_small.json", fmt="omnigaia", media_dir=tmp_path)
    t1, t2, t3 = tasks
    assert (t1.answer_type, t1.level, t1.category) == ("number", "easy", "History & Society")
    assert t1.assets[0].path == str((tmp_path / "audios" / "abc123XYZ.wav").resolve())
    assert t1.assets[1].path is None and t1.meta["missing_media"] == ["images/000000000042.jpg"]
    assert t2.meta["task_type"] is None and t2.meta["required_external_tools"] == [] and t2.meta["total_steps"] is None
    assert t2.meta["sources"][0]["type"] == "web_search" and "Pingxi" in t2.meta["sources"][0]["text"]
    assert t2.meta["asset_windows"] == {"video_QwErTy12345": [10, 40]}
    assert t3.answer_type == "list" and t3.meta["total_steps"] is None
    assert [s["type"] for s in t3.meta["sources"]] == ["video_transcript_from_video_zzz999aaa", "calculation"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("1930", "number"), ("34,943", "number"), ("-52.62", "number"), ("46.31%", "number"), ("$5.8", "number"),
     ("Marker", "text"), ("3 simultaneous volleys", "text"), ("Brands Hatch; Dynes Motor Group; 2.3 km", "list"),
     ("Parker Industries, Spider-Man: Far From Home, 2071", "list"), (None, "text"),
     ("December 1891, and the palace was commissioned by the queen for her summer stays by the sea.", "text")],
)
def test_infer_answer_type(answer, expected):
    assert infer_answer_type(answer) == expected


def test_normalize_sources_shapes():
    assert normalize_sources(None) == []
    mixed = normalize_sources([{"type": "read_video", "time_span": [5, 9], "key_information": "k"},
                               {"type": "audio", "reference": "r"}, "Calculation: 1 + 1 = 2"])
    assert [(s["type"], s["text"], s["start"], s["end"]) for s in mixed] == [
        ("read_video", "k", 5.0, 9.0), ("audio", "r", None, None), ("calculation", "1 + 1 = 2", None, None)]


def test_omnigaia_bad_record_names_file_record_field():
    with pytest.raises(TaskFileError) as err:
        load_tasks(DATA / "omnigaia_bad.json", fmt="omnigaia")
    e = err.value
    assert e.path.endswith("omnigaia_bad.json") and e.record == "record 1 (id 2)"
    assert e.field == "omni_modal_input.1.type" and "hologram" in str(e)


def test_worldsense_loader_mcq_and_subtitles():
    tasks = load_tasks(DATA / "worldsense" / "worldsense_qa.json")
    assert [t.id for t in tasks] == ["vidA-task0", "vidA-task1", "vidB-task0"]
    t = tasks[0]
    assert (t.answer_type, t.answer, t.source, t.category) == ("mcq", "B", "worldsense", "Recognition")
    assert t.options == ["A. Run", "B. Stop", "C. Jump", "D. Sit"]
    assert t.assets[0].subtitles == str((DATA / "worldsense" / "vidA.srt").resolve())
    assert t.assets[0].duration == 12.5 and t.meta["task_type"] == "Speech Recognition"
    assert tasks[2].assets[0].subtitles is None  # vidB has no .srt: kept, without a surrogate


def test_worldsense_bad_answer_names_key_and_field():
    with pytest.raises(TaskFileError) as err:
        load_tasks(DATA / "worldsense" / "bad_answer.json", fmt="worldsense")
    assert (err.value.record, err.value.field) == ("key 'vidA'.task3", "answer")


def test_jsonl_loader_resolves_relative_paths_against_the_file():
    tasks = load_tasks(DATA / "jsonl" / "tasks.jsonl")
    assert [t.id for t in tasks] == ["j1", "j2", "j3"]
    j2 = tasks[1]
    assert j2.assets[0].subtitles == str((DATA / "jsonl" / "assets" / "v1.srt").resolve())
    assert Path(j2.assets[0].subtitles).is_file()
    assert j2.corpus == str((DATA / "jsonl" / "corpus.jsonl").resolve())
    assert j2.base_dir == str((DATA / "jsonl").resolve())


@pytest.mark.parametrize(
    ("name", "record", "field"),
    [("bad_answer_type.jsonl", "line 2", "answer_type"), ("bad_json.jsonl", "line 2", None)],
)
def test_jsonl_bad_record_names_line_and_field(name, record, field):
    with pytest.raises(TaskFileError) as err:
        load_tasks(DATA / "jsonl" / name)
    assert (err.value.record, err.value.field) == (record, field)
    assert err.value.path.endswith(name)


def test_synthetic_dir_sets_the_shared_corpus(tmp_path):
    (tmp_path / "tasks.jsonl").write_text('{"id": "s1", "question": "q", "answer": "1"}\n')
    (tmp_path / "corpus.jsonl").write_text('{"url": "u", "text": "t"}\n')
    assert detect_format(tmp_path) == "synthetic"
    (task,) = load_tasks(tmp_path)
    assert task.corpus == str((tmp_path / "corpus.jsonl").resolve())


def test_detect_format_and_unknown_options():
    assert detect_format(DATA / "omnigaia_small.json") == "omnigaia"
    assert detect_format(DATA / "worldsense" / "worldsense_qa.json") == "worldsense"
    assert detect_format(DATA / "jsonl" / "tasks.jsonl") == "jsonl"
    with pytest.raises(ValueError, match="do not apply"):
        load_tasks(DATA / "jsonl" / "tasks.jsonl", fmt="jsonl", media_dir="x")
    with pytest.raises(TaskFileError, match="no such file"):
        load_tasks(DATA / "missing.jsonl")


# ---------------------------------------------------------------- the CLI


def _cli(*args: str):
    from omnidecision.cli import app

    return CliRunner().invoke(app, ["tasks", "check", *args])


def test_check_good_file_prints_counts():
    result = _cli(str(DATA / "omnigaia_small.json"), "--format", "omnigaia")
    assert result.exit_code == 0, result.output
    assert "ok: 3 tasks" in result.output
    assert "level: easy=1, hard=1, medium=1" in result.output
    assert "answer type: list=1, number=1, text=1" in result.output
    assert "Geography & Travel=1" in result.output


def test_check_bad_file_names_file_record_field_and_fails():
    result = _cli(str(DATA / "jsonl" / "bad_answer_type.jsonl"))
    assert result.exit_code == 1
    out = result.output
    assert "bad_answer_type.jsonl" in out and "record: line 2" in out and "field: answer_type" in out


def test_check_names_a_misspelt_tool_where_the_task_lists_it(tmp_path):
    """A task's `tools` are the tools it allows: a misspelt one would forbid every call to the tool meant."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "question": "q", "tools": ["web_search"]}\n'
                     '{"id": "b", "question": "q", "tools": ["code_executor", "web_serch"]}\n')
    result = _cli(str(tasks))
    assert result.exit_code == 1
    out = result.output
    assert "record: line 2" in out and "field: tools.1" in out and "unknown tool 'web_serch'" in out
    assert "OMNIDECISION_PLUGINS" in out  # how to register a tool of one's own
    tasks.write_text('{"id": "a", "question": "q", "tools": ["web_search"]}\n')
    assert _cli(str(tasks)).exit_code == 0


def test_check_bad_worldsense_and_unknown_format():
    result = _cli(str(DATA / "worldsense" / "bad_answer.json"), "--format", "worldsense")
    assert result.exit_code == 1 and "key 'vidA'.task3" in result.output and "field: answer" in result.output
    assert _cli(str(DATA / "omnigaia_small.json"), "--format", "xml").exit_code != 0


@pytest.mark.parametrize("fmt", ["jsonl", "auto"])
def test_check_non_utf8_jsonl_names_file_line_and_column(tmp_path, fmt):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"id": "a", "question": "q"}\n\n{"id": "b", "question": "caf\xe9"}\n')
    result = _cli(str(bad), "--format", fmt)
    assert result.exit_code == 1
    out = result.output
    assert f"{bad}: line 3: not UTF-8 text: byte 0xe9 at column 29" in out and "record: line 3" in out
    assert "codec can't decode" not in out


@pytest.mark.parametrize("fmt", ["omnigaia", "auto"])
def test_non_utf8_json_names_the_line(tmp_path, fmt):
    bad = tmp_path / "meta.json"
    bad.write_bytes(b'[{"id": 1,\n  "question": "\xff"}]')
    with pytest.raises(TaskFileError) as err:
        load_tasks(bad, fmt=fmt)
    assert (err.value.path, err.value.record) == (str(bad), "line 2") and "byte 0xff at column 16" in str(err.value)


def test_synthetic_suite_file_stands_for_its_folder_and_other_files_say_what_to_pass(tmp_path):
    (tmp_path / "tasks.jsonl").write_text('{"id": "s1", "question": "q", "answer": "1"}\n')
    (tmp_path / "corpus.jsonl").write_text('{"url": "u", "text": "t"}\n')
    assert load_tasks(tmp_path / "tasks.jsonl", fmt="synthetic") == load_tasks(tmp_path, fmt="synthetic")
    with pytest.raises(TaskFileError, match="pass that folder, or format jsonl") as err:
        load_tasks(tmp_path / "corpus.jsonl", fmt="synthetic")
    assert err.value.path == str(tmp_path / "corpus.jsonl")
    with pytest.raises(TaskFileError, match="no such synthetic suite folder"):
        load_tasks(tmp_path / "nowhere", fmt="synthetic")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskFileError, match="tasks.jsonl is missing .*omnidecision tasks synth"):
        load_tasks(tmp_path / "empty", fmt="synthetic")
