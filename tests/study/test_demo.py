"""`attnmt demo`, the main job, end to end on a tiny setting (two spawned training processes)."""

import json

from attnmt.study.demo import DemoSettings, run_demo


def test_demo_writes_every_output_and_reports_both_models(tmp_path):
    settings = DemoSettings(n_train=400, n_valid=40, n_test=60, max_len=20, hidden_size=16, emb_size=8,
                            attn_size=8, batch_tokens=300, steps={"seq2seq": 15, "rnnsearch": 15},
                            bucket_edges=(4, 10, 21))
    result = run_demo(tmp_path / "demo", settings=settings, quiet=True)
    out = tmp_path / "demo"
    for name in ("bleu_by_length.png", "attention_short.png", "attention_medium.png", "attention_long.png",
                 "report.md", "results.json"):
        assert (out / name).stat().st_size > 0, name
    assert set(result.bleu) == {"seq2seq", "rnnsearch"}
    assert [b.n for b in result.buckets["rnnsearch"]] == [b.n for b in result.buckets["seq2seq"]]
    assert sum(b.n for b in result.buckets["rnnsearch"]) == 60
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["bleu"] == result.bleu
    phases = saved["phases_s"]
    assert set(phases) == {"data", "training", "training_seq2seq", "training_rnnsearch", "evaluation", "figures"}
    assert all(v >= 0 for v in phases.values())
    assert 0 < phases["training_rnnsearch"] <= phases["training"] + 0.1
    assert abs(sum(phases[k] for k in ("data", "training", "evaluation", "figures")) - saved["seconds"]) < 0.5
    assert "| 4-9 |" in result.report and "rnnsearch" in result.report
