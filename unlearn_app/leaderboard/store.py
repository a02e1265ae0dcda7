"""Where submissions are kept: a local folder or a Hugging Face Hub dataset repository, in one layout,
``submissions/<id>/submission.json`` (+ the per-item files), one folder per submission, one commit per submission.

The Hub endpoint is ``$HF_ENDPOINT`` (the public Hub when unset); tokens come from ``HF_TOKEN`` or the saved login
and are never printed. A failed upload changes nothing on the Hub; running the same ``unlearn submit`` again resumes
it (the submission's id, and so its folder, depends only on its content), and a submission already there is refused.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

from unlearn_app.leaderboard.submission import Built, SubmissionError, write

log = logging.getLogger(__name__)
FOLDER = "submissions"
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class StoreError(RuntimeError):
    """A leaderboard store that cannot be read or written; the message says what to do."""


def is_hub_id(source: str) -> bool:
    """``OWNER/NAME`` that is not a local path."""
    return bool(HUB_ID.fullmatch(source)) and not Path(source).exists()


def _api():
    from huggingface_hub import HfApi

    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


def hub_ids(repo: str) -> set[str]:
    """The submission ids in the dataset ``repo`` (empty for a repo not created yet)."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError

    try:
        files = _api().list_repo_files(repo, repo_type="dataset")
    except RepositoryNotFoundError:
        return set()
    except (OfflineModeIsEnabled, HfHubHTTPError, OSError) as e:
        raise StoreError(f"cannot list the dataset {repo} on the Hub ({type(e).__name__}): offline, or "
                         "HF_HUB_OFFLINE is set? Run where the Hub is reachable, or use --to DIR") from None
    return {f.split("/")[1] for f in files if f.startswith(f"{FOLDER}/") and f.count("/") >= 2}


def download(repo: str, into: str | Path) -> Path:
    """A local copy of the dataset ``repo`` (its ``submissions/`` folder) in ``into``."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    try:
        path = snapshot_download(repo, repo_type="dataset", local_dir=str(into), allow_patterns=[f"{FOLDER}/**"],
                                 endpoint=os.environ.get("HF_ENDPOINT") or None)
    except RepositoryNotFoundError:
        raise StoreError(f"the Hub has no dataset {repo} (or it is private and no token with read access is set)") from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):
        raise StoreError(f"cannot download the dataset {repo}: the Hub cannot be reached (offline, or HF_HUB_OFFLINE "
                         "is set); pass a local leaderboard folder, or run where the Hub is reachable") from None
    except (HfHubHTTPError, OSError) as e:
        raise StoreError(f"cannot download the dataset {repo}: {' '.join(str(e).split())[:300]}") from None
    return Path(path)


def save_local(built: Built, root: str | Path) -> Path:
    """Write the submission into ``root/submissions/<id>/``; a duplicate is refused."""
    base = Path(root) / FOLDER
    try:
        base.mkdir(parents=True, exist_ok=True)
        return write(built, base)
    except SubmissionError as e:
        raise StoreError(str(e)) from None
    except OSError as e:  # --to names a file, or a folder that cannot be written
        raise StoreError(f"cannot write the submission into {root}: {e.strerror or type(e).__name__}; --to takes a "
                         "folder") from None


def upload(built: Built, repo: str, private: bool = True, retries: int = 3, backoff_s: float = 2.0) -> str:
    """Upload the submission as one commit into the dataset ``repo`` (created if absent). Returns the commit URL."""
    import tempfile

    from unlearn_app.checkpoint.hub import _auth_error, _status

    if built.id in hub_ids(repo):
        raise StoreError(f"{repo} already holds the submission {built.id} (the same model, method and results); "
                         "a duplicate is refused")
    api = _api()
    last: Exception | None = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = write(built, tmp)
        for attempt in range(1, retries + 1):
            try:
                api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
                info = api.upload_folder(repo_id=repo, repo_type="dataset", folder_path=str(folder),
                                         path_in_repo=f"{FOLDER}/{built.id}",
                                         commit_message=f"Submission {built.id}")
                return str(getattr(info, "commit_url", info))
            except Exception as e:  # network, HTTP and auth errors all end up here
                if _auth_error(e):
                    raise StoreError(f"the Hub refused {repo} (HTTP {_status(e)}): set HF_TOKEN to a token with write "
                                     "access, then run the same command again") from e
                last = e
                log.warning("upload of %s to %s failed (attempt %d/%d): %s", built.id, repo, attempt, retries,
                            type(e).__name__)
                if attempt < retries:
                    time.sleep(backoff_s * attempt)
    raise StoreError(f"could not upload {built.id} to {repo} after {retries} attempts ({type(last).__name__}); "
                     "nothing was committed: run the same command again to resume")
