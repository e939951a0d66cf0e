"""The model folder a training run writes, kept rerunnable, and written by one process at a time.

`open_model_folder` takes the folder's lock (attnmt.runtime.lock: a second train, resume, fine-tune or
average of the folder is refused with one line naming the process that holds it), refuses a folder that
holds another run (unless --overwrite or --resume) and notes what the folder holds. A folder that holds
only what a run writes (RUN_FILES) and no checkpoint, a run killed before its first, is restarted
without --overwrite; anything else in it still needs --overwrite. With --overwrite, or on such a
restart, the previous run's files are moved aside into MODEL_DIR/.replaced rather than deleted.
`ModelFolder.settle`, called however the run ends, keeps the new files once the run has written a
checkpoint (and drops the replaced ones); a run that ends without one (bad data, a wrong setting, Ctrl-C
twice) leaves the folder as it found it: what it added is removed, what it replaced is put back, and a
folder it created is removed, so that the same command succeeds once the cause is fixed. A run killed
before it could settle is settled by the next one that opens the folder. A token store (MODEL_DIR/store,
written by `attnmt prepare` or by training) is a cache of the corpus, never part of a run: it is neither
replaced nor removed once complete.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from attnmt.errors import UserError
from attnmt.runtime.lock import LOCK, FolderLock, lock_folder
from attnmt.runtime.safe_write import make_folder, refuse_file_in_the_way, remove_temporaries

STORE = "store"  # attnmt prepare's token store
REPLACED = ".replaced"  # --overwrite: the previous run's files until the new run's first checkpoint
# The previous run's files on their way into REPLACED, and back out of it: a folder renamed only once the move
# is complete, so that a run killed in the middle of one leaves a folder that says which entries are whose
REPLACING, RESTORING = ".replacing", ".restoring"
OWN = frozenset({REPLACED, REPLACING, RESTORING, LOCK})  # this module's names, never a run's files
# What a run writes into its folder: a folder that holds only these and no checkpoint is a run that died early
RUN_FILES = frozenset({"config.yaml", "train_log.jsonl", "train.log", "tensorboard", "checkpoints"})
RUN_PREFIXES = ("src.", "tgt.", "joint.")  # the tokenizers and vocabularies


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _has_checkpoint(model_dir: Path) -> bool:
    return any((model_dir / "checkpoints").glob("*.pt"))


def _complete_store(entry: Path) -> bool:
    return entry.name == STORE and (entry / "meta.json").is_file()


def _put_back(model_dir: Path, kept: frozenset[str] = frozenset()) -> None:
    """A run without a checkpoint undone: what it added removed (but the names in ``kept``, the lock and a
    complete store), then what it moved into REPLACED put back (through RESTORING, so that a kill in the middle
    is finished by `_recover`)."""
    for entry in model_dir.iterdir():
        if entry.name not in kept | OWN and not _complete_store(entry):
            _remove(entry)
    if (model_dir / REPLACED).is_dir():
        (model_dir / REPLACED).rename(model_dir / RESTORING)
        _move_back(model_dir / RESTORING, model_dir)


def _move_back(staging: Path, model_dir: Path) -> None:
    """Every entry of ``staging`` (the previous run's) back into the folder, then ``staging`` removed."""
    for entry in staging.iterdir():
        entry.rename(model_dir / entry.name)
    staging.rmdir()


def _set_aside(model_dir: Path, held: list[Path]) -> None:
    """The previous run's entries moved into REPLACED, through REPLACING (renamed once complete)."""
    staging = model_dir / REPLACING
    staging.mkdir()
    for entry in held:
        entry.rename(staging / entry.name)
    staging.rename(model_dir / REPLACED)


@dataclass
class ModelFolder:
    path: Path
    created: bool  # the folder did not exist before the run
    before: frozenset[str]  # the names it held when the run started (the replaced files moved aside)
    lock: FolderLock
    resume: bool = False
    had_lock: bool = True  # the lock file was there before the run (else a run without a checkpoint removes it)

    def has_checkpoint(self) -> bool:
        return _has_checkpoint(self.path)

    def settle(self) -> None:
        """After the run, however it ended: keep its files if it wrote a checkpoint, else restore the folder;
        then release the folder's lock."""
        try:
            if not self.resume and self.path.is_dir():
                self._settle()
        finally:
            self.lock.release()  # after the lock file's removal: no other process locks a file on its way out

    def _settle(self) -> None:
        if self.has_checkpoint():
            _remove(self.path / REPLACED)
            return
        _put_back(self.path, self.before)
        _unmake(self.path, self.created, self.had_lock)


def _unmake(model_dir: Path, created: bool, had_lock: bool) -> None:
    """The lock file removed if the run made it, the folder too if the run made it and it is empty."""
    if not had_lock:
        (model_dir / LOCK).unlink(missing_ok=True)
    if created and not any(model_dir.iterdir()):
        model_dir.rmdir()


@contextlib.contextmanager
def held(model_dir: Path, command: str) -> Iterator[None]:
    """``model_dir`` locked for a command that writes into it without being a run (attnmt prepare's store):
    made if missing; its lock file, if this made it, and the folder, if this made it and it stays empty,
    removed after."""
    refuse_file_in_the_way(model_dir, "model folder")
    created = not model_dir.exists()
    make_folder(model_dir, "model folder")
    had_lock = (model_dir / LOCK).exists()
    lock = lock_folder(model_dir, command)
    try:
        yield
    finally:
        _unmake(model_dir, created, had_lock)
        lock.release()


def _recover(model_dir: Path) -> None:
    """Settle what a run killed before its own settle left: a move cut short (REPLACING, RESTORING: all the
    previous run's) finished back into the folder; a REPLACED folder dropped if its replacement wrote a
    checkpoint, else put back."""
    for staging in (REPLACING, RESTORING):  # killed while moving: no file of the new run was written yet
        if (model_dir / staging).is_dir():
            _move_back(model_dir / staging, model_dir)
    if not (model_dir / REPLACED).is_dir():
        return
    if _has_checkpoint(model_dir):
        _remove(model_dir / REPLACED)
    else:
        _put_back(model_dir)


def open_model_folder(model_dir: Path, overwrite: bool, resume: bool, command: str | None = None) -> ModelFolder:
    """Lock the folder for this run, check it and make it ready; a folder in use by another process, or one
    that holds another run, is a UserError."""
    refuse_file_in_the_way(model_dir, "model folder")
    created = not model_dir.exists()
    if resume and created:
        raise UserError(f"--resume: {model_dir} has no checkpoints/last.pt to resume from; train without --resume")
    make_folder(model_dir, "model folder")
    had_lock = (model_dir / LOCK).exists()
    lock = lock_folder(model_dir, command or ("attnmt train --resume" if resume else "attnmt train"))
    try:
        _recover(model_dir)
        folder = _ready(model_dir, created, overwrite, resume, lock)
    except BaseException:
        _unmake(model_dir, created, had_lock)
        lock.release()
        raise
    folder.had_lock = had_lock
    return folder


def _ready(model_dir: Path, created: bool, overwrite: bool, resume: bool, lock: FolderLock) -> ModelFolder:
    if resume:
        if not (model_dir / "checkpoints" / "last.pt").is_file():
            raise UserError(f"--resume: {model_dir} has no checkpoints/last.pt to resume from; train without --resume")
        remove_temporaries(model_dir / "checkpoints")
        return ModelFolder(model_dir, False, frozenset(p.name for p in model_dir.iterdir()), lock, resume=True)
    held = [p for p in model_dir.iterdir() if p.name not in OWN | {STORE}]
    restart = (held and not _has_checkpoint(model_dir) and (model_dir / "config.yaml").is_file()
               and all(p.name in RUN_FILES or p.name.startswith(RUN_PREFIXES) for p in held))
    if held and not (overwrite or restart):
        raise UserError(f"model folder {model_dir} exists and is not empty; choose another folder, "
                        "--resume it, or pass --overwrite to replace it")
    if held:  # --overwrite, or a run that wrote no checkpoint: kept aside until this run's first checkpoint
        _set_aside(model_dir, held)
    return ModelFolder(model_dir, created, frozenset(p.name for p in model_dir.iterdir()), lock)
