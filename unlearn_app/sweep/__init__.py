"""``unlearn sweep``: methods x hyperparameters x seeds as one resumable experiment (:mod:`.spec` the YAML file and
its trials, :mod:`.trial` one trial, :mod:`.engine` the default engine and the results stream, :mod:`.ray_engine`
Ray, :mod:`.leaderboard` where it ends)."""
