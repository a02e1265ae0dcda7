"""Results anyone can check: the submission format (:mod:`.submission`, ``submission.schema.json``), where
submissions are kept (:mod:`.store`: a local folder or a Hub dataset), reading one as untrusted input
(:mod:`.untrusted`), their validation by recomputation (:mod:`.validate`, with the reference run's checks in
:mod:`.reference`), the importers of other leaderboards' tables (:mod:`.importers`), what the site publishes
(:mod:`.publish`) and the static site (:mod:`.site`)."""
