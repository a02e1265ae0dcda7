"""`unlearn report` shows Leak@k beside the greedy forget score of the same questions when a run holds both."""

from fixtures.runs import write_results
from unlearn_app.cli import main
from unlearn_app.reports.tables import task_tables


def test_leak_at_k_table_opens_with_the_greedy_forget_rouge(tmp_path, capsys):
    write_results(tmp_path / "npo", {"tofu_forget10": {"forget_rougeL_recall": 0.125, "forget_quality": 0.5},
                                     "tofu_forget10_leak": {"leak_at_1": 0.25, "leak_at_128": 0.875}})
    write_results(tmp_path / "ga", {"tofu_forget10_leak": {"leak_at_1": 0.5, "leak_at_128": 1.0}})  # no greedy run
    assert main(["report", str(tmp_path / "npo"), str(tmp_path / "ga"), "--names", "NPO,GA"]) == 0
    out = capsys.readouterr().out
    table = out.split("## tofu_forget10_leak\n\n")[1].split("\n\n")[0].splitlines()
    assert table == ["| metric | NPO | GA |", "|---|---:|---:|",
                     "| Forget ROUGE-L recall (greedy) | 0.1250 | n/a |",
                     "| Forget Leak@1 | 0.2500 | 0.5000 |",
                     "| Forget Leak@128 | 0.8750 | 1.0000 |"]
    # the greedy task keeps its own table unchanged
    assert "| Forget ROUGE-L recall | 0.1250 | n/a |" in out.split("## tofu_forget10\n\n")[1].split("\n\n")[0]


def test_muse_and_wmdp_pairs():
    runs = {"m": {"muse_news": {"forget_knowmem": 0.3, "forget_verbmem": 0.2},
                  "muse_news_knowmem_leak": {"leak_at_1": 0.4}, "muse_books_verbmem_leak": {"leak_at_1": 0.1},
                  "wmdp_bio": {"acc": 0.26}, "wmdp_bio_leak": {"leak_at_1": 0.27}}}
    tables = {task: (models, rows) for task, models, rows in task_tables(runs)}
    models, rows = tables["muse_news_knowmem_leak"]
    assert rows[0] == ("forget_knowmem (beside)", "KnowMem on forget (greedy, ROUGE-L F1)")
    assert models["m"]["forget_knowmem (beside)"] == 0.3
    models, rows = tables["wmdp_bio_leak"]
    assert rows[0][1] == "Accuracy (most likely option)" and models["m"][rows[0][0]] == 0.26
    models, rows = tables["muse_books_verbmem_leak"]  # no muse_books run: nothing beside
    assert [key for key, _ in rows] == ["leak_at_1"]
