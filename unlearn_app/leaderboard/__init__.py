"""Results anyone can check: the submission format (:mod:`.submission`, ``submission.schema.json``), where
submissions are kept (:mod:`.store`: a local folder or a Hub dataset), their validation by recomputation
(:mod:`.validate`), the importers of other leaderboards' tables (:mod:`.importers`) and the static site (:mod:`.site`)."""
