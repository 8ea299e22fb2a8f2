"""uwf.util.jsonfmt: json.loads' answers without importing json for a whole compact value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from uwf.util import jsonfmt


@pytest.mark.parametrize(
    "text", ['{"a": "cut', '{"a": 1', '"x', "[1, 2", "{} {}", "", "nul", '{"a": 1}x']
)
def test_loads_refuses_what_json_refuses_with_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        jsonfmt.loads(text)


@pytest.mark.parametrize("text", ['{"a":[1,2.5,"é"],"b":null}', " [1] ", "true", "-0.5e3"])
def test_loads_reads_what_json_reads(text: str) -> None:
    import json

    assert jsonfmt.loads(text) == json.loads(text)


def test_a_cut_string_is_a_value_error_before_json_is_imported() -> None:
    """The bare C scanner fails on a string cut short with a SystemError while json.decoder
    is not imported (a damaged threads.yaml line): loads answers ValueError all the same."""
    code = (
        "import sys\n"
        "from uwf.util import jsonfmt\n"
        "assert 'json.decoder' not in sys.modules\n"
        "try:\n"
        '    jsonfmt.loads(\'{"a": "cut\')\n'
        "except ValueError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (out.returncode, out.stdout, out.stderr) == (0, "JSONDecodeError\n", "")


@pytest.mark.parametrize("value", [{"a": [1, 2.5, "é", None]}, "x\u2028y", [], {"": {"b": True}}])
def test_dumps_prints_what_json_prints(value: object) -> None:
    """Compact, non-ASCII kept: ``json.dumps`` with JavaScript's separators, through the
    private encoder (the module's docstring says why)."""
    import json

    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert jsonfmt.dumps(value) == expected


def test_dumps_refuses_what_is_not_json() -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        jsonfmt.dumps({1, 2})
    with pytest.raises(ValueError):
        jsonfmt.dumps(float("nan"))
