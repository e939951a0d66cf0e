"""LoadOptions: how a model folder loads, checked once where it is built, the same for every entry point."""

from __future__ import annotations

import pytest

import attnmt
from attnmt.cli import main
from attnmt.config.load_options import LoadOptions
from attnmt.errors import UserError


@pytest.mark.parametrize("settings,message", [
    ({"threads": 0}, "load: threads=0 is out of range; allowed: >= 1 and <= 4096"),
    ({"inter_threads": 0}, "load: inter_threads=0 is out of range; allowed: >= 1 and <= 4096"),
    ({"int8": True, "device": "cuda"}, "int8 decoding runs on a CPU only, not on cuda"),
])
def test_an_out_of_range_option_is_refused_where_it_is_built(settings, message):
    with pytest.raises(UserError, match=f"^{message}"):
        LoadOptions(**settings)
    with pytest.raises(UserError, match=f"^{message}"):
        LoadOptions.of(LoadOptions(), **settings)


def test_settings_go_on_top_of_the_options_and_an_unknown_one_names_the_closest():
    assert LoadOptions.of(LoadOptions(int8=True), threads=2) == LoadOptions(int8=True, threads=2)
    with pytest.raises(UserError, match="^load: unknown option 'thread'; did you mean 'threads'"):
        LoadOptions.of(thread=2)


def test_the_python_api_and_the_server_take_the_same_options(tiny_model):
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    from attnmt.serve import ServeConfig
    from attnmt.serve.engine import load_models

    translator = attnmt.load(tiny_model, int8=True, checkpoint="last")
    assert any(isinstance(m, DynamicLinear) for m in translator.model.modules())
    with pytest.raises(UserError, match="did you mean 'int8'"):
        attnmt.load(tiny_model, int_8=True)
    config = ServeConfig(load=LoadOptions(int8=True))
    (served,) = load_models([str(tiny_model)], config.load).values()
    assert any(isinstance(m, DynamicLinear) for m in served.model.modules())


def test_the_command_line_checks_its_flags_against_the_options_ranges(tiny_model, capsys):
    for command in ("translate", "serve"):
        assert main([command, "--model", str(tiny_model), "--inter-threads", "5000"]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"attnmt: error: {command} --inter-threads: inter_threads=5000 is out of range; allowed: >= 1 and <= 4096"]
