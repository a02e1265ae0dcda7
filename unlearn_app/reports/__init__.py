"""Reports on evaluated runs: ``unlearn report``'s tables (:mod:`.tables`) and HTML page (:mod:`.html_page`), the
attack recovery report (:mod:`.attack_recovery`), every figure (:mod:`.plots`), and one evaluated run as the reports
read it (:mod:`.evaluated_run`)."""
