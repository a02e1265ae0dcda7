"""Pushing a checkpoint folder to the Hugging Face Hub: one commit per run, private by default, retried.

Tokens come only from the environment (``HF_TOKEN``) or the saved ``hf auth login``; they are never
printed or written. A failed upload leaves the local folder as it was and says how to resume.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from unlearn_methods.checkpoint_folder import PARTIAL

log = logging.getLogger(__name__)


class HubUploadError(RuntimeError):
    """The upload failed after all retries; the message holds the command that resumes it."""


class NotACheckpointError(HubUploadError):
    """The folder is not one to upload: absent, not a folder, or an unfinished run (``NAME.partial...``)."""


def check_pushable(folder: str | Path) -> Path:
    """``folder`` as a Path if it can be uploaded; else :class:`NotACheckpointError` saying why. A folder named
    ``NAME.partial`` or ``NAME.partial-XXXX`` is an unfinished (or stopped) run, never a checkpoint
    (:mod:`unlearn_methods.checkpoint_folder`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NotACheckpointError(f"{folder}: no such folder (give the checkpoint folder `unlearn run --out` wrote)")
    name = folder.resolve().name
    if name.endswith(PARTIAL) or PARTIAL + "-" in name:
        final = folder.resolve().with_name(name[: name.index(PARTIAL)])
        raise NotACheckpointError(
            f"{folder} is an unfinished run (`unlearn run` trains in NAME{PARTIAL} and renames it to NAME when the "
            f"checkpoint is complete): push {final} once the run has finished, or finish it with `unlearn run ... "
            f"--out {final} --resume`")
    return folder


def push_folder(folder: str | Path, repo_id: str, private: bool = True, retries: int = 3, backoff_s: float = 2.0,
                commit_message: str | None = None, endpoint: str | None = None) -> str:
    """Create ``repo_id`` if absent and upload ``folder`` in one commit. Returns the commit URL."""
    from huggingface_hub import HfApi

    folder = check_pushable(folder)
    api = HfApi(endpoint=endpoint)
    message = commit_message or f"Upload unlearned checkpoint ({folder.name})"
    last: Exception | None = None
    resume = f"unlearn push {folder} --repo {repo_id}" + ("" if private else " --public")
    for attempt in range(1, retries + 1):
        try:
            api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
            info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), commit_message=message,
                                     ignore_patterns=["checkpoints/**", "work/**", "*.lock"])
            return str(getattr(info, "commit_url", info))
        except Exception as e:  # network, HTTP and auth errors all end up here
            if _auth_error(e):  # retrying cannot help: say how to authenticate
                raise HubUploadError(
                    f"The Hub refused {repo_id} (HTTP {_status(e)}): no token, or one without write access to it. "
                    f"Set HF_TOKEN to a write token (https://huggingface.co/settings/tokens) or run "
                    f"`hf auth login`, then resume with: {resume}. The local checkpoint is intact."
                ) from e
            last = e
            log.warning("Upload of %s to %s failed (attempt %d/%d): %s", folder, repo_id, attempt, retries, type(e).__name__)
            if attempt < retries:
                time.sleep(backoff_s * attempt)
    raise HubUploadError(
        f"Could not upload {folder} to the Hub repo {repo_id} after {retries} attempts ({type(last).__name__}: {last}). "
        f"The local checkpoint is intact. Resume with: {resume}"
    ) from last


def _status(e: Exception) -> int | None:
    response = getattr(e, "response", None)
    return getattr(response, "status_code", None)


def _auth_error(e: Exception) -> bool:
    """A missing or insufficient token (HTTP 401/403, or no token saved at all)."""
    return _status(e) in (401, 403) or type(e).__name__ == "LocalTokenNotFoundError"
