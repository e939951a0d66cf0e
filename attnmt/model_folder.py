"""The model folder a training run writes, kept rerunnable.

`open_model_folder` refuses a folder that holds another run (unless --overwrite or --resume) and
notes what the folder holds. With --overwrite the previous run's files are moved aside into
MODEL_DIR/.replaced rather than deleted. `ModelFolder.settle`, called however the run ends, keeps
the new files once the run has written a checkpoint (and drops the replaced ones); a run that ends
without one (bad data, a wrong setting, Ctrl-C twice) leaves the folder as it found it: what it
added is removed, what it replaced is put back, and a folder it created is removed, so that the same
command succeeds once the cause is fixed. A token store (MODEL_DIR/store, written by `attnmt prepare`
or by training) is a cache of the corpus, never part of a run: it is neither replaced nor removed
once complete.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from attnmt.checkpoint import remove_stale_temporaries
from attnmt.errors import UserError

STORE = "store"  # attnmt prepare's token store
REPLACED = ".replaced"  # --overwrite: the previous run's files until the new run's first checkpoint


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@dataclass
class ModelFolder:
    path: Path
    created: bool  # the folder did not exist before the run
    before: frozenset[str]  # the names it held when the run started (the replaced files moved aside)
    resume: bool = False

    def has_checkpoint(self) -> bool:
        return any((self.path / "checkpoints").glob("*.pt"))

    def settle(self) -> None:
        """After the run, however it ended: keep its files if it wrote a checkpoint, else restore the folder."""
        if self.resume or not self.path.is_dir():
            return
        replaced = self.path / REPLACED
        if self.has_checkpoint():
            _remove(replaced)
            return
        for entry in self.path.iterdir():
            complete_store = entry.name == STORE and (entry / "meta.json").is_file()
            if entry.name not in self.before and entry.name != REPLACED and not complete_store:
                _remove(entry)
        if replaced.is_dir():
            for entry in replaced.iterdir():
                entry.rename(self.path / entry.name)
            replaced.rmdir()
        if self.created and not any(self.path.iterdir()):
            self.path.rmdir()


def refuse_file_in_the_way(path: Path, what: str = "folder") -> None:
    """A UserError naming ``what`` (e.g. "model folder") if ``path`` or one of its parents is a file."""
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            where = "is a file" if part == path else f"is inside {part}, which is a file"
            raise UserError(f"{what} {path} {where}; choose a folder")


def make_folder(path: Path, what: str = "folder") -> None:
    """Create the folder ``path`` and its parents; a file in the way, or a folder that cannot be created,
    is a UserError naming ``what`` and the path."""
    refuse_file_in_the_way(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{what} {path} cannot be created ({e.strerror or e}); choose another folder") from None


def open_model_folder(model_dir: Path, overwrite: bool, resume: bool) -> ModelFolder:
    """Check the folder for this run and make it ready; a folder that holds another run is a UserError."""
    refuse_file_in_the_way(model_dir, "model folder")
    if resume:
        if not (model_dir / "checkpoints" / "last.pt").is_file():
            raise UserError(f"--resume: {model_dir} has no checkpoints/last.pt to resume from; train without --resume")
        remove_stale_temporaries(model_dir / "checkpoints")
        _remove(model_dir / REPLACED)  # left by an overwriting run killed after its first checkpoint
        return ModelFolder(model_dir, False, frozenset(p.name for p in model_dir.iterdir()), resume=True)
    created = not model_dir.exists()
    held = [] if created else [p for p in model_dir.iterdir() if p.name not in (STORE, REPLACED)]
    if held and not overwrite:
        raise UserError(f"model folder {model_dir} exists and is not empty; choose another folder, "
                        "--resume it, or pass --overwrite to replace it")
    make_folder(model_dir, "model folder")
    if held:  # --overwrite
        replaced = model_dir / REPLACED
        _remove(replaced)  # an older run's, whose replacement has since written a checkpoint
        replaced.mkdir()
        for entry in held:
            entry.rename(replaced / entry.name)
    return ModelFolder(model_dir, created, frozenset(p.name for p in model_dir.iterdir()))
